package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxShown is how much of a key or value a page shows; the rest is summarized, so a large or
// binary record cannot freeze the page.
const maxShown = 16 << 10

// Message is a record as the messages page shows it.
type Message struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	KeySize   int       `json:"key_size"`
	ValueSize int       `json:"value_size"`
	// Headers are the record's headers in their order; a key may repeat (KIP-82).
	Headers []Header `json:"headers,omitempty"`
}

// Header is one record header, its value shown as text (hex when it is not UTF-8).
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Browse says which records to read.
type Browse struct {
	Partition int32  // -1: every partition
	From      string // start, end, offset, timestamp
	Offset    int64
	Timestamp string // RFC 3339 or Unix ms
	Limit     int
	Filter    string // key or value substring
	Decode    string // text, json, hex
	// Next (the live tail) gives each partition's next offset to read; partitions it does not
	// name are read from their end.
	Next map[int32]int64
}

func parseBrowse(r *http.Request) (Browse, error) {
	q := r.URL.Query()
	b := Browse{Partition: -1, From: or(q.Get("from"), "end"), Limit: 50, Filter: q.Get("filter"), Decode: or(q.Get("decode"), "text"), Timestamp: q.Get("timestamp")}
	if s := q.Get("partition"); s != "" && s != "all" {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			return b, fmt.Errorf("partition %q is not a partition number", s)
		}
		b.Partition = int32(p)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return b, fmt.Errorf("limit %q: between 1 and 1000 records", s)
		}
		b.Limit = n
	}
	if s := q.Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return b, fmt.Errorf("offset %q is not an offset", s)
		}
		b.Offset = n
	}
	if q.Has("next") { // the live tail: empty means every partition from its end
		b.Next = map[int32]int64{}
	}
	if s := q.Get("next"); s != "" {
		for _, item := range strings.Split(s, ",") {
			ps, os, ok := strings.Cut(item, ":")
			p, perr := strconv.ParseInt(ps, 10, 32)
			o, oerr := strconv.ParseInt(os, 10, 64)
			if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
				return b, fmt.Errorf("next %q: partition:offset,...", s)
			}
			b.Next[int32(p)] = o
		}
	}
	switch b.From {
	case "start", "end", "offset":
	case "timestamp":
		if _, err := parseTime(b.Timestamp); err != nil {
			return b, err
		}
	default:
		return b, fmt.Errorf("from %q: start, end, offset or timestamp", b.From)
	}
	switch b.Decode {
	case "text", "json", "hex":
	default:
		return b, fmt.Errorf("decode %q: text, json or hex", b.Decode)
	}
	return b, nil
}

func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("timestamp %q: RFC 3339 (2026-11-26T10:00:00Z) or Unix milliseconds", s)
}

// read reads up to b.Limit records matching the filter, from each chosen partition's starting
// offset, giving up after wait. It also returns each chosen partition's end offset when it
// looked.
func (c *Console) read(ctx context.Context, r *http.Request, topic string, b Browse, wait time.Duration) ([]Message, map[int32]int64, error) {
	_, adm, err := c.client(r)
	if err != nil {
		return nil, nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, nil, err
	}
	var at kadm.ListedOffsets
	if b.From == "timestamp" {
		ms, _ := parseTime(b.Timestamp)
		if at, err = adm.ListOffsetsAfterMilli(ctx, ms, topic); err != nil {
			return nil, nil, err
		}
	}
	offsets := map[int32]kgo.Offset{}
	want := 0
	endOf := map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		if b.Partition >= 0 && e.Partition != b.Partition {
			return
		}
		endOf[e.Partition] = e.Offset
		start := int64(0)
		if s, ok := starts.Lookup(topic, e.Partition); ok {
			start = s.Offset
		}
		from := start
		switch {
		case b.Next != nil:
			from = e.Offset
			if n, ok := b.Next[e.Partition]; ok {
				from = min(max(start, n), e.Offset)
			}
		case b.From == "end":
			from = max(start, e.Offset-int64(b.Limit))
		case b.From == "offset":
			from = min(max(start, b.Offset), e.Offset)
		case b.From == "timestamp":
			if o, ok := at.Lookup(topic, e.Partition); ok && o.Offset >= 0 {
				from = o.Offset
			} else {
				from = e.Offset
			}
		}
		if from < e.Offset {
			offsets[e.Partition] = kgo.NewOffset().At(from)
			want += int(e.Offset - from)
		}
	})
	if b.Partition >= 0 && len(offsets) == 0 {
		if _, ok := ends.Lookup(topic, b.Partition); !ok {
			return nil, nil, fmt.Errorf("topic %s has no partition %d", topic, b.Partition)
		}
	}
	if len(offsets) == 0 {
		return []Message{}, endOf, nil
	}
	cl, err := kgo.NewClient(append(c.clientOpts(r),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out := []Message{}
	seen := 0
	for len(out) < b.Limit && seen < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if e.Err != context.DeadlineExceeded && e.Err != context.Canceled {
				return out, endOf, e.Err
			}
		}
		fs.EachRecord(func(rec *kgo.Record) {
			seen++
			if len(out) >= b.Limit || b.Filter != "" && !bytes.Contains(rec.Key, []byte(b.Filter)) && !bytes.Contains(rec.Value, []byte(b.Filter)) {
				return
			}
			out = append(out, message(rec, b.Decode))
		})
	}
	return out, endOf, nil
}

func message(rec *kgo.Record, decode string) Message {
	m := Message{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, KeySize: len(rec.Key), ValueSize: len(rec.Value),
		Key: show(rec.Key, decode), Value: show(rec.Value, decode)}
	for _, h := range rec.Headers {
		m.Headers = append(m.Headers, Header{Key: h.Key, Value: show(h.Value, "text")})
	}
	return m
}

// show decodes b for display: text (hex when it is not UTF-8), pretty JSON (text when it is not
// JSON), or hex; at most maxShown bytes.
func show(b []byte, decode string) string {
	if b == nil {
		return ""
	}
	cut := b
	if len(cut) > maxShown {
		cut = cut[:maxShown]
	}
	suffix := ""
	if len(b) > maxShown {
		suffix = fmt.Sprintf(" … (%d bytes in all)", len(b))
	}
	switch decode {
	case "json":
		// Indenting grows a value with its nesting (each line gets its depth's indent): only
		// one whose indented size is bounded is indented, and the result is cut too.
		var buf bytes.Buffer
		if len(b) <= maxShown && indentedBound(b) <= 4*maxShown && json.Indent(&buf, b, "", "  ") == nil {
			if buf.Len() > maxShown {
				return string(runeCut(buf.Bytes(), maxShown)) + fmt.Sprintf(" … (%d bytes indented)", buf.Len())
			}
			return buf.String()
		}
	case "hex":
		return hex.EncodeToString(cut) + suffix
	}
	if !utf8.Valid(b) { // the whole value: a cut may fall inside a character
		return "0x" + hex.EncodeToString(cut) + suffix
	}
	return string(runeCut(b, maxShown)) + suffix
}

// runeCut is b cut to at most n bytes, not inside a UTF-8 character.
func runeCut(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

// indentedBound bounds the size of b indented by two spaces per level: every structural
// character outside strings may start a line indented to the deepest level.
func indentedBound(b []byte) int {
	depth, maxDepth, structural, inString, escaped := 0, 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			maxDepth = max(maxDepth, depth)
			structural++
		case c == ']' || c == '}':
			depth--
			structural++
		case c == ',':
			structural++
		}
	}
	return len(b) + structural*(1+2*maxDepth)
}

// MessagesPage is the messages page's data.
type MessagesPage struct {
	Topic      string
	Partitions []int32
	Browse     Browse
	Messages   []Message
}

func (c *Console) messages(w http.ResponseWriter, r *http.Request) {
	c.renderMessages(w, r, "", nil, 0)
}

func (c *Console) renderMessages(w http.ResponseWriter, r *http.Request, errMsg string, form map[string][]string, status int) {
	topic := r.PathValue("topic")
	mp := MessagesPage{Topic: topic}
	b, err := parseBrowse(r)
	mp.Browse = b
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	if _, adm, cerr := c.client(r); cerr == nil {
		if d, derr := adm.ListTopics(ctx, topic); derr == nil {
			if td, ok := d[topic]; ok && td.Err == nil {
				for _, p := range td.Partitions.Sorted() {
					mp.Partitions = append(mp.Partitions, p.Partition)
				}
			} else if ok {
				err = td.Err
			}
		}
	}
	if err == nil {
		mp.Messages, _, err = c.read(ctx, r, topic, b, 3*time.Second)
	}
	if err != nil {
		errMsg = strings.TrimSpace(errMsg + " " + err.Error())
		if status == 0 {
			status = http.StatusBadRequest
		}
	}
	c.render(w, r, "messages", page{Title: topic + ": messages", Nav: "topics", Data: mp, Error: errMsg, Form: form, Status: status})
}

func (c *Console) produce(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	topic := r.PathValue("topic")
	fail := func(msg string) { c.renderMessages(w, r, msg, r.PostForm, http.StatusUnprocessableEntity) }
	rec := &kgo.Record{Topic: topic, Value: []byte(r.PostForm.Get("value"))}
	if k := r.PostForm.Get("key"); k != "" {
		rec.Key = []byte(k)
	}
	for i, line := range strings.Split(r.PostForm.Get("headers"), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			fail(fmt.Sprintf("Header line %d, %q: a header is key=value.", i+1, line))
			return
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	opts := append(c.clientOpts(r), kgo.RecordRetries(3))
	if s := strings.TrimSpace(r.PostForm.Get("partition")); s != "" && s != "any" {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			fail(fmt.Sprintf("Partition %q is not a partition number.", s))
			return
		}
		rec.Partition = int32(p)
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err.Error())
		return
	}
	defer cl.Close()
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	res := cl.ProduceSync(ctx, rec)
	if err := res.FirstErr(); err != nil {
		fail("Producing: " + err.Error())
		return
	}
	got := res[0].Record
	redirect(w, r, "/topics/"+topic+"/messages", fmt.Sprintf("Produced to partition %d at offset %d.", got.Partition, got.Offset))
}

// recordsAPI is the live tail: GET /api/v1/topics/{topic}/records?partition=P&from=offset&offset=N
// answers the records from there as JSON (waiting up to a second for new ones).
func (c *Console) recordsAPI(w http.ResponseWriter, r *http.Request) {
	b, err := parseBrowse(r)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	msgs, ends, err := c.read(ctx, r, r.PathValue("topic"), b, time.Second)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"records": msgs, "ends": ends})
}
