package controller

import (
	"encoding/json"
	"fmt"
)

// The metadata image is the data of the controller's Raft snapshots, as JSON.

func encodeImage(img *Image) []byte {
	b, err := json.Marshal(img)
	if err != nil {
		panic(fmt.Sprintf("controller: encoding the image: %v", err))
	}
	return b
}

// EncodeImage returns an image's snapshot form (JSON), as the Raft snapshots hold it.
func EncodeImage(img *Image) []byte { return encodeImage(img) }

// DecodeImage reads an image EncodeImage wrote.
func DecodeImage(b []byte) (*Image, error) { return decodeImage(b) }

func decodeImage(b []byte) (*Image, error) {
	img := NewImage()
	if len(b) > 0 {
		if err := json.Unmarshal(b, img); err != nil {
			return nil, err
		}
	}
	img.reindex()
	return img, nil
}
