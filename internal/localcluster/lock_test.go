package localcluster

import (
	"testing"
	"time"
)

// TestLockCreationKeepsCreationsApart: while one holder has the creation
// lock, another waits for it, and gets it once the first lets it go.
func TestLockCreationKeepsCreationsApart(t *testing.T) {
	c := Cluster{Root: t.TempDir()}
	unlock, err := c.LockCreation()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		defer close(got)
		second, err := c.LockCreation()
		if err != nil {
			t.Error(err)
			return
		}
		second()
	}()
	select {
	case <-got:
		t.Fatal("a second holder took the lock while the first held it")
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(time.Minute):
		t.Fatal("the second holder did not get the lock once the first let it go")
	}
}
