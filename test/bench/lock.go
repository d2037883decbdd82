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

// The lease's annotations that hand the cluster over: a run waiting for the
// lease names itself in waitingAnnotation, and the holder that would delete
// the cluster it made leaves it running for that run instead, marking the
// lease handedOverAnnotation; the run that takes such a lease deletes the
// cluster when it ends, as if it had made it.
const (
	waitingAnnotation    = "bench.podset.dev/waiting"
	handedOverAnnotation = "bench.podset.dev/handed-over"
)

// lock takes the cluster's benchmark lease, waiting while another live run
// holds it (a holder that stopped renewing for lockDuration is dead), and
// keeps renewing it until release is called. inherited says that the run
// before handed the cluster over (it made it, and this run is to delete
// it). release(deleting) stops renewing and gives the lease up; when this
// run means to delete the cluster (deleting) and another run is waiting,
// it hands the cluster over instead and reports keep: the cluster stays.
func (c *cluster) lock(ctx context.Context) (release func(deleting bool) (keep bool), inherited bool, err error) {
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
			inherited = l.Annotations[handedOverAnnotation] != ""
			l.Annotations = nil
			l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = &id, &now, &now
			l, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: benchFieldManager})
		case err == nil:
			if holder := deref(l.Spec.HolderIdentity, ""); holder != waiting {
				waiting = holder
				logf("waiting for the benchmark run %s to finish with the %s cluster", holder, clusterName)
			}
			err = errBusy
			if l.Annotations[waitingAnnotation] != id {
				metav1.SetMetaDataAnnotation(&l.ObjectMeta, waitingAnnotation, id)
				if _, uerr := leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: benchFieldManager}); uerr != nil && !apierrors.IsConflict(uerr) {
					err = uerr
				}
			}
		}
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && !errors.Is(err, errBusy) {
			if waiting != "" {
				return nil, false, fmt.Errorf("the %s cluster stopped answering while run %s held it (an older benchmark deletes the cluster it made as it ends): run again: %w", clusterName, waiting, err)
			}
			return nil, false, fmt.Errorf("taking the benchmark lease: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
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
			if apierrors.IsConflict(err) {
				// A waiting run annotated the lease: renew the latest.
				if renewed, err = leases.Get(rctx, lockName, metav1.GetOptions{}); err == nil && deref(renewed.Spec.HolderIdentity, "") == id {
					renewed.Spec.RenewTime = &now
					renewed, err = leases.Update(rctx, renewed, metav1.UpdateOptions{FieldManager: benchFieldManager})
				} else if err == nil {
					err = fmt.Errorf("held by %s now", deref(renewed.Spec.HolderIdentity, ""))
				}
			}
			if err != nil {
				if rctx.Err() == nil {
					logf("renewing the benchmark lease: %v", err)
				}
				continue
			}
			l = renewed
		}
	}()
	return func(deleting bool) bool {
		cancel()
		<-done
		bg := context.Background()
		if deleting {
			if cur, err := leases.Get(bg, lockName, metav1.GetOptions{}); err == nil && cur.UID == l.UID && cur.Annotations[waitingAnnotation] != "" {
				next := cur.Annotations[waitingAnnotation]
				cur.Annotations = map[string]string{handedOverAnnotation: id}
				cur.Spec.HolderIdentity, cur.Spec.RenewTime = nil, nil
				if _, err := leases.Update(bg, cur, metav1.UpdateOptions{FieldManager: benchFieldManager}); err == nil {
					logf("leaving the %s cluster to the benchmark run %s, which waits for it and deletes it when it ends", clusterName, next)
					return true
				}
			}
		}
		uid := l.UID
		_ = leases.Delete(bg, lockName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		return false
	}, inherited, nil
}

var errBusy = fmt.Errorf("the benchmark lease is held")
