package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The lease that lets one benchmark run at a time use the cluster: two runs
// would count each other's requests, and each would take the other's
// namespaces for leftovers of an interrupted run.
const (
	lockNamespace = "default"
	lockName      = "podset-bench"
	lockDuration  = 30 * time.Second
)

// lock takes the cluster's benchmark lease, waiting while another live run
// holds it (a holder that stopped renewing for lockDuration is dead), and
// keeps renewing it until release is called. release(false) stops
// renewing and leaves the lease to go with the cluster: a run that deletes
// the cluster it made holds the lease until the cluster is gone, so that
// a run waiting for it never takes a cluster about to vanish; it finds
// the cluster gone instead (errClusterGone) and starts its own.
func (c *cluster) lock(ctx context.Context) (release func(deleteLease bool), err error) {
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), c.runID)
	leases := c.cs.CoordinationV1().Leases(lockNamespace)
	waiting := ""
	var l *coordinationv1.Lease
	for {
		now := metav1.NewMicroTime(time.Now())
		var err error
		l, err = leases.Get(ctx, lockName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: lockNamespace, Name: lockName},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: &id, AcquireTime: &now, RenewTime: &now,
					LeaseDurationSeconds: ptrTo(int32(lockDuration / time.Second)),
				},
			}
			l, err = leases.Create(ctx, l, metav1.CreateOptions{FieldManager: benchFieldManager})
		case err == nil && (l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > lockDuration):
			l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = &id, &now, &now
			l, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: benchFieldManager})
		case err == nil:
			if holder := deref(l.Spec.HolderIdentity, ""); holder != waiting {
				waiting = holder
				logf("waiting for the benchmark run %s to finish with the %s cluster", holder, clusterName)
			}
			err = errBusy
		}
		if err == nil {
			break
		}
		if waiting != "" && !errors.Is(err, errBusy) && !isAPIStatus(err) {
			// The cluster stopped answering while another run held it:
			// that run deleted it as it ended (main.go starts it again).
			return nil, fmt.Errorf("%w: %w", errClusterGone, err)
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && !errors.Is(err, errBusy) {
			return nil, fmt.Errorf("taking the benchmark lease: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}

	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-rctx.Done():
				return
			case <-time.After(lockDuration / 3):
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			renewed, err := leases.Update(rctx, l, metav1.UpdateOptions{FieldManager: benchFieldManager})
			if err != nil {
				if rctx.Err() == nil {
					logf("renewing the benchmark lease: %v", err)
				}
				continue
			}
			l = renewed
		}
	}()
	return func(deleteLease bool) {
		cancel()
		<-done
		if !deleteLease {
			return
		}
		uid := l.UID
		_ = leases.Delete(context.Background(), lockName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	}, nil
}

var (
	errBusy        = errors.New("the benchmark lease is held")
	errClusterGone = errors.New("the cluster is gone")
)

// isAPIStatus reports whether err is the API server's answer, not a
// failure to reach it.
func isAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
