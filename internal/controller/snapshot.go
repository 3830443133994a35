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
	if err := img.check(); err != nil {
		return nil, fmt.Errorf("controller: image: %w", err)
	}
	img.reindex()
	return img, nil
}

// check rejects an image no sequence of commands makes: a missing entry (JSON null) where
// the code takes one to be there, a key that is not its entry's name or id, two topics with
// one id.
func (im *Image) check() error {
	for id, n := range im.Nodes {
		if n == nil || n.ID != id {
			return fmt.Errorf("node %d: missing or under another id", id)
		}
	}
	ids := make(map[TopicID]string, len(im.Topics))
	for name, t := range im.Topics {
		if t == nil || t.Name != name {
			return fmt.Errorf("topic %q: missing or under another name", name)
		}
		if other, dup := ids[t.ID]; dup {
			return fmt.Errorf("topics %q and %q have the same id %v", name, other, t.ID)
		}
		ids[t.ID] = name
		for i, p := range t.Partitions {
			if p == nil {
				return fmt.Errorf("topic %q: partition %d missing", name, i)
			}
		}
		for i, o := range t.Objects {
			if o == nil {
				return fmt.Errorf("topic %q: object partition %d missing", name, i)
			}
		}
	}
	for id, w := range im.ObjWriters {
		if w == nil {
			return fmt.Errorf("object writer %q missing", id)
		}
	}
	for id, f := range im.ForgottenWriters {
		if f == nil {
			return fmt.Errorf("forgotten object writer %q missing", id)
		}
	}
	for name, u := range im.Users {
		if u == nil {
			return fmt.Errorf("user %q missing", name)
		}
	}
	for id, t := range im.Tokens {
		if t == nil || t.ID != id {
			return fmt.Errorf("delegation token %q missing or misfiled", id)
		}
	}
	for run, r := range im.Requests {
		if r == nil {
			return fmt.Errorf("requests of run %q missing", run)
		}
	}
	for i, q := range im.ClientQuotas {
		if q == nil {
			return fmt.Errorf("client quota %d missing", i)
		}
	}
	return nil
}
