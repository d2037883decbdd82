package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	names := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, PodName("web", i))
		}
		return out
	}
	cases := map[string]struct {
		names []string
		want  string
	}{
		"none":      {want: ""},
		"one":       {names: names(1), want: "web-0"},
		"five":      {names: names(5), want: "web-0, web-1, web-2, web-3, web-4"},
		"six":       {names: names(6), want: "web-0, web-1, web-2, web-3, web-4 and 1 more"},
		"a hundred": {names: names(100), want: "web-0, web-1, web-2, web-3, web-4 and 95 more"},
		// The writes of a pass complete in any order; the event reads
		// the same whatever it was.
		"in the order writes completed": {names: []string{"web-2", "web-0", "web-1"}, want: "web-0, web-1, web-2"},
		"by ordinal, not by text":       {names: []string{"web-10", "web-9", "web-100", "web-2"}, want: "web-2, web-9, web-10, web-100"},
		"the first five by ordinal":     {names: []string{"web-7", "web-12", "web-3", "web-5", "web-1", "web-6", "web-4"}, want: "web-1, web-3, web-4, web-5, web-6 and 2 more"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := append([]string(nil), tc.names...)
			if diff := cmp.Diff(tc.want, Summarize(tc.names)); diff != "" {
				t.Errorf("Summarize() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.names); diff != "" {
				t.Errorf("Summarize() changed its argument (-before +after):\n%s", diff)
			}
		})
	}
}
