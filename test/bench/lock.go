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
// keeps renewing it until release is called.
func (c *cluster) lock(ctx context.Context) (release func(), err error) {
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
	return func() {
		cancel()
		<-done
		uid := l.UID
		_ = leases.Delete(context.Background(), lockName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	}, nil
}

var errBusy = fmt.Errorf("the benchmark lease is held")
