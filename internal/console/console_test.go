package console

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestShowKeepsPagesLight(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	if s := show([]byte(big), "text"); len(s) > maxShown+64 || !strings.Contains(s, "102400 bytes in all") {
		t.Fatalf("a 100 KiB value shows as %d bytes", len(s))
	}
	if s := show([]byte{0xff, 0x00, 0x01}, "text"); s != "0xff0001" {
		t.Fatalf("binary as text: %q", s)
	}
	if s := show([]byte(`{"a":1}`), "json"); s != "{\n  \"a\": 1\n}" {
		t.Fatalf("json: %q", s)
	}
	if s := show([]byte(`not json`), "json"); s != "not json" {
		t.Fatalf("not json: %q", s)
	}
	if s := show([]byte("AB"), "hex"); s != "4142" {
		t.Fatalf("hex: %q", s)
	}
}

func TestParseBrowseRefusesBadInput(t *testing.T) {
	for _, q := range []string{"partition=x", "partition=-2", "limit=0", "limit=5000", "offset=-1", "from=middle",
		"from=timestamp&timestamp=yesterday", "decode=base64", "next=0:x", "next=1"} {
		if _, err := parseBrowse(httptest.NewRequest("GET", "/topics/t/messages?"+q, nil)); err == nil {
			t.Errorf("%s accepted", q)
		}
	}
	b, err := parseBrowse(httptest.NewRequest("GET", "/x?partition=3&from=timestamp&timestamp=2026-11-26T10:00:00Z&limit=7&next=0:5,1:9", nil))
	if err != nil || b.Partition != 3 || b.Limit != 7 || b.Next[1] != 9 {
		t.Fatalf("%+v %v", b, err)
	}
	if b, _ := parseBrowse(httptest.NewRequest("GET", "/x?next=", nil)); b.Next == nil {
		t.Fatal("an empty next is the tail's first call: every partition from its end")
	}
}

func TestParseConfigs(t *testing.T) {
	m, err := parseConfigs("retention.ms=1000\n# comment\n\n cleanup.policy = compact ")
	if err != nil || *m["retention.ms"] != "1000" || *m["cleanup.policy"] != "compact" {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := parseConfigs("novalue"); err == nil {
		t.Fatal("a line without = accepted")
	}
}
