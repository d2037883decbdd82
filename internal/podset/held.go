package podset

// Held is which older revision each pod that the partition (or
// spec.paused) holds back ran
// when the operator last saw it, by ordinal, so that a held-back pod that
// is deleted or fails is recreated from the revision it had, even when
// three revisions are live at once (the partition was moved between two
// template changes). It holds entries only for pods below the partition
// on a template other than the current one: none at all outside a staged
// rollout.
//
// It is memory, not state: after an operator restart a held-back pod that
// is already gone is recreated from status.currentRevision, the revision
// the oldest pods run, as StatefulSet recreates every such pod.
type Held map[int]string

// Observe is what the held-back pods run now, given what was held before.
// An ordinal without a pod keeps its entry until its pod is back; an
// ordinal the partition no longer holds back, or that a new
// spec.ordinals.start left behind, loses it. It returns nil when
// nothing is held.
func (h Held) Observe(v *View) Held {
	ps, update := v.PodSet, v.Revs.Update
	start := Start(ps)
	partition := min(RolloutFrom(ps), start+int(Replicas(ps)))
	var held Held
	for ordinal, hash := range h {
		if ordinal >= start && ordinal < partition {
			held = held.with(ordinal, hash)
		}
	}
	for _, m := range v.Controlled {
		if !m.HasOrdinal || m.Ordinal < start || m.Ordinal >= partition {
			continue
		}
		if m.Hash == update {
			delete(held, m.Ordinal)
		} else {
			held = held.with(m.Ordinal, m.Hash)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return held
}

func (h Held) with(ordinal int, hash string) Held {
	if h == nil {
		h = Held{}
	}
	h[ordinal] = hash
	return h
}

// Remembered is the revision the pod at an ordinal ran when last seen, or
// "".
func (h Held) Remembered(ordinal int) string { return h[ordinal] }

// Kept lists the revisions the remembered pods ran: they are not pruned.
func (h Held) Kept() []string {
	var hashes []string
	for _, hash := range h {
		hashes = append(hashes, hash)
	}
	return hashes
}
