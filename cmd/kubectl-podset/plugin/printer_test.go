package plugin

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// failingWriter takes n writes, then fails every one after.
type failingWriter struct {
	bytes.Buffer
	n int
}

var errWrite = errors.New("write failed")

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.n == 0 {
		return 0, errWrite
	}
	w.n--
	return w.Buffer.Write(b)
}

func TestPrinter(t *testing.T) {
	for name, tc := range map[string]struct {
		writes  int
		want    string
		wantErr error
	}{
		"every write succeeds": {writes: 100, want: "podset.podset.dev/web\nA     BB\nCCC   D\ndone\n"},
		// The line before the table gets out, the table does not.
		"the table fails": {writes: 1, want: "podset.podset.dev/web\n", wantErr: errWrite},
		// Nothing is written after the first failure, also not what
		// would succeed.
		"the first line fails": {writes: 0, want: "", wantErr: errWrite},
	} {
		t.Run(name, func(t *testing.T) {
			w := &failingWriter{n: tc.writes}
			p := &printer{w: w}
			p.printf("podset.podset.dev/%s\n", "web")
			p.table([][]string{{"A", "BB"}, {"CCC", "D"}})
			if p.err != nil {
				w.n = 100 // the writer recovers; the printer writes no more
			}
			p.printf("done\n")
			if !errors.Is(p.err, tc.wantErr) {
				t.Errorf("err = %v, want %v", p.err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, w.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
