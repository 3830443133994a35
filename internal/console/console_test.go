package console

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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

// Record headers are an ordered list whose keys may repeat (KIP-82): the records API and the
// messages page show every one, in order.
func TestMessageShowsEveryHeader(t *testing.T) {
	rec := &kgo.Record{Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: "hop", Value: []byte("first")}, {Key: "trace", Value: []byte{0xff}}, {Key: "hop", Value: []byte("second")}}}
	m := message(rec, "text")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"headers":[{"key":"hop","value":"first"},{"key":"trace","value":"0xff"},{"key":"hop","value":"second"}]`; !strings.Contains(string(b), want) {
		t.Errorf("records API: %s; want %s", b, want)
	}
	c := reviewConsole(t, false)
	w := httptest.NewRecorder()
	c.render(w, httptest.NewRequest("GET", "/topics/t/messages", nil), "messages", page{Data: MessagesPage{Topic: "t", Messages: []Message{m}}})
	body := w.Body.String()
	first, second := strings.Index(body, "<code>hop</code>=first"), strings.Index(body, "<code>hop</code>=second")
	if first < 0 || second < first || !strings.Contains(body, "<code>trace</code>=0xff") {
		t.Errorf("messages page, headers hop=first, trace=0xff, hop=second: %s", section(body, `id="messages"`))
	}
}

// section is the part of an HTML page from marker on, for a failure message.
func section(body, marker string) string {
	if i := strings.Index(body, marker); i >= 0 {
		body = body[i:]
	}
	if len(body) > 2000 {
		body = body[:2000]
	}
	return body
}
