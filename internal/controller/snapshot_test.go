package controller

import (
	"bytes"
	"testing"
)

// FuzzDecodeImage: a snapshot's image either fails to decode with an error or is one the
// controller can clone, apply commands to and encode again, without panicking.
func FuzzDecodeImage(f *testing.F) {
	f.Add(encodeImage(NewImage()))
	f.Add(encodeImage(withObjectTopic(f)))
	f.Add([]byte(`{"topics":{"t":null}}`))
	f.Add([]byte(`{"nodes":{"1":{"id":2}}}`))
	cmds := [][]byte{
		[]byte(`{"op":"elect","elect":{"items":[{"topic":"01000000000000000000000000000000","partition":0,"epoch":1,"leader":3}]}}`),
		[]byte(`{"op":"create-topic","create_topic":{"name":"x","id":"02000000000000000000000000000000","assignments":[[1,2]]}}`),
		[]byte(`{"op":"commit-file","commit_file":{"writer":"w","node":1,"incarnation":2,"seq":1,"floor":1,"key":"k","sections":[{"topic":"09000000000000000000000000000000","partition":0,"length":10,"batches":[{"r":3,"p":-1,"t":5}]}]}}`),
		[]byte(`{"op":"trim-objects","trim_objects":{"items":[{"topic":"09000000000000000000000000000000","partition":0,"start":2}]}}`),
		[]byte(`{"op":"set-isr","set_isr":{"items":[{"topic":"01000000000000000000000000000000","partition":0,"epoch":1,"isr":[3,1]}]}}`),
		[]byte(`{"op":"forget-writer","forget_writer":{"writer":"w"}}`),
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		im, err := decodeImage(b)
		if err != nil {
			return
		}
		enc := encodeImage(im)
		again, err := decodeImage(enc)
		if err != nil {
			t.Fatalf("a decoded image, encoded again, does not decode: %v", err)
		}
		if !bytes.Equal(encodeImage(again), enc) {
			t.Fatalf("the image changed over an encoding round trip")
		}
		c := im.Clone()
		c.EachPartition(func(_ *Topic, _ int32, p *Partition) { c.MajorityLive(p) })
		for i, raw := range cmds {
			cmd, err := DecodeCommand(raw)
			if err != nil {
				t.Fatal(err)
			}
			Apply(c, uint64(100+i), cmd)
		}
		encodeImage(c)
	})
}
