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
