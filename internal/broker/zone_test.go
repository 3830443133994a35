package broker

import "testing"

func TestClientZone(t *testing.T) {
	for id, want := range map[string]string{
		"":                                    "",
		"app":                                 "",
		"app,warpstream_az=us-east-1a":        "us-east-1a",
		"warpstream_az=eu-west-1b,app=x":      "eu-west-1b",
		"runnel_rack=rack-2":                  "rack-2",
		"app,warpstream_az=":                  "",
		"app,warpstream_az= a ,runnel_rack=b": "a",
	} {
		if got := clientZone(id); got != want {
			t.Errorf("clientZone(%q) = %q; want %q", id, got, want)
		}
	}
}
