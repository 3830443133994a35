package batch

// DeleteHorizon returns the batch's KIP-534 delete horizon (unix ms) and whether it has one:
// compaction sets it on a batch it keeps tombstones in, and drops those tombstones once it has
// passed. The batch's base timestamp holds it; its records' timestamp deltas count from it.
func (h *Header) DeleteHorizon() (int64, bool) {
	return h.BaseTimestamp, h.Attributes&AttrDeleteHorizon != 0
}

// Filter returns batch b with only the records keep accepts (keep gets each record and its
// offset), and how many records it removed. The batch keeps its base offset, last offset delta,
// producer fields and codec (it is recompressed), and every record its offset and timestamp.
// It returns b itself if nothing changes, and nil if no record is kept, unless keepEmpty (an
// empty batch then, uncompressed).
//
// horizon > 0 is the delete horizon (unix ms) to give a kept batch with a tombstone (a null
// value), or a kept control batch (a transaction marker), that has none yet, as Kafka's cleaner
// does since KIP-534: the base timestamp becomes the horizon, with AttrDeleteHorizon, and the
// records' timestamp deltas are re-encoded from it.
func Filter(h *Header, b []byte, keep func(rec *Record, offset int64) bool, keepEmpty bool, horizon int64) ([]byte, int, error) {
	var kept []Record // their slices alias b or its decompressed records, which stay unchanged
	removed, tombstone := 0, false
	err := EachRecord(h, b, func(rec *Record) {
		if !keep(rec, h.BaseOffset+int64(rec.OffsetDelta)) {
			removed++
			return
		}
		kept = append(kept, *rec)
		tombstone = tombstone || rec.Value == nil
	})
	if err != nil {
		return nil, 0, err
	}
	_, hasHorizon := h.DeleteHorizon()
	setHorizon := horizon > 0 && (tombstone || h.IsControl() && len(kept) > 0) && !hasHorizon
	switch {
	case removed == 0 && !setHorizon:
		return b, 0, nil
	case len(kept) == 0 && !keepEmpty:
		return nil, removed, nil
	}
	nh := *h
	nh.RecordCount = int32(len(kept))
	if setHorizon {
		nh.Attributes |= AttrDeleteHorizon
		nh.BaseTimestamp = horizon
	}
	var recs []byte
	maxTs := int64(-1)
	for i := range kept {
		r := &kept[i]
		ts := h.BaseTimestamp + r.TimestampDelta
		maxTs = max(maxTs, ts)
		if setHorizon {
			recs = AppendRecord(recs, ts-horizon, r.OffsetDelta, r.Key, r.Value, r.HeaderCount, r.Headers)
		} else {
			recs = append(recs, r.Raw...)
		}
	}
	if h.Attributes&AttrLogAppendTime == 0 && len(kept) > 0 {
		nh.MaxTimestamp = maxTs
	}
	if len(kept) == 0 {
		nh.Attributes &^= AttrCompressionMask
	}
	recs, err = Compress(nh.Codec(), recs)
	if err != nil {
		return nil, 0, err
	}
	return AppendBatch(nil, nh, recs), removed, nil
}

// FirstTimestamp is the batch's base timestamp, its records' earliest in general; under a
// delete horizon, which takes the base timestamp's place, the header no longer has it, and this
// is the max timestamp.
func (h *Header) FirstTimestamp() int64 {
	if _, ok := h.DeleteHorizon(); ok {
		return h.MaxTimestamp
	}
	return h.BaseTimestamp
}
