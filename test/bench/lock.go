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
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
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

// benchLease is this run's hold on the cluster's benchmark lease.
type benchLease struct {
	leases typedcoordinationv1.LeaseInterface
	id     string
	l      *coordinationv1.Lease
}

// lock takes the cluster's benchmark lease, waiting while another live run
// holds it (a holder that stopped renewing for lockDuration is dead), and
// keeps renewing it until release is called. inherited says that the run
// before handed the cluster over (it made it, and this run is to delete
// it). release(deleting) stops renewing and gives the lease up; when this
// run means to delete the cluster (deleting) and another run is waiting,
// it hands the cluster over instead and reports keep: the cluster stays.
func (c *cluster) lock(ctx context.Context) (release func(deleting bool) (keep bool), inherited bool, err error) {
	host, _ := os.Hostname()
	bl := &benchLease{leases: c.cs.CoordinationV1().Leases(lockNamespace), id: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), c.runID)}
	waiting := ""
	for {
		holder, handedOver, err := bl.take(ctx)
		if err == nil {
			inherited = handedOver
			break
		}
		if holder != "" && holder != waiting {
			waiting = holder
			logf("waiting for the benchmark run %s to finish with the %s cluster", holder, clusterName)
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && !errors.Is(err, errBusy) {
			if waiting != "" {
				return nil, false, fmt.Errorf("the %s cluster stopped answering while run %s held it, which may have deleted it: run again: %w", clusterName, waiting, err)
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
			if err := bl.renew(rctx); err != nil && rctx.Err() == nil {
				logf("renewing the benchmark lease: %v", err)
			}
		}
	}()
	return func(deleting bool) bool {
		cancel()
		<-done
		return bl.release(deleting)
	}, inherited, nil
}

// take makes one attempt at the lease: it creates it, or takes it over
// when its holder stopped renewing it (handedOver: the holder handed the
// cluster over). While another run holds it, it returns errBusy and the
// holder, and names this run on the lease as waiting for it.
func (bl *benchLease) take(ctx context.Context) (holder string, handedOver bool, err error) {
	now := metav1.NewMicroTime(time.Now())
	l, err := bl.leases.Get(ctx, lockName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: lockNamespace, Name: lockName},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &bl.id, AcquireTime: &now, RenewTime: &now,
				LeaseDurationSeconds: ptrTo(int32(lockDuration / time.Second)),
			},
		}
		bl.l, err = bl.leases.Create(ctx, l, metav1.CreateOptions{FieldManager: benchFieldManager})
		return "", false, err
	case err != nil:
		return "", false, err
	case l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > lockDuration:
		handedOver = l.Annotations[handedOverAnnotation] != ""
		l.Annotations = nil
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = &bl.id, &now, &now
		bl.l, err = bl.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: benchFieldManager})
		return "", handedOver, err
	}
	holder = deref(l.Spec.HolderIdentity, "")
	if l.Annotations[waitingAnnotation] != bl.id {
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, waitingAnnotation, bl.id)
		if _, err := bl.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: benchFieldManager}); err != nil && !apierrors.IsConflict(err) {
			return holder, false, err
		}
	}
	return holder, false, errBusy
}

// renew renews the lease held; a conflict means a waiting run annotated
// it, and the latest version is renewed, if this run still holds it.
func (bl *benchLease) renew(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	bl.l.Spec.RenewTime = &now
	renewed, err := bl.leases.Update(ctx, bl.l, metav1.UpdateOptions{FieldManager: benchFieldManager})
	if apierrors.IsConflict(err) {
		if renewed, err = bl.leases.Get(ctx, lockName, metav1.GetOptions{}); err != nil {
			return err
		}
		if holder := deref(renewed.Spec.HolderIdentity, ""); holder != bl.id {
			return fmt.Errorf("held by %s now", holder)
		}
		renewed.Spec.RenewTime = &now
		renewed, err = bl.leases.Update(ctx, renewed, metav1.UpdateOptions{FieldManager: benchFieldManager})
	}
	if err != nil {
		return err
	}
	bl.l = renewed
	return nil
}

// release gives the lease up: to a waiting run, with the cluster (keep),
// when this run would delete it (deleting); otherwise by deleting it.
func (bl *benchLease) release(deleting bool) (keep bool) {
	bg := context.Background()
	if deleting {
		if cur, err := bl.leases.Get(bg, lockName, metav1.GetOptions{}); err == nil && cur.UID == bl.l.UID && cur.Annotations[waitingAnnotation] != "" {
			next := cur.Annotations[waitingAnnotation]
			cur.Annotations = map[string]string{handedOverAnnotation: bl.id}
			cur.Spec.HolderIdentity, cur.Spec.RenewTime = nil, nil
			if _, err := bl.leases.Update(bg, cur, metav1.UpdateOptions{FieldManager: benchFieldManager}); err == nil {
				logf("leaving the %s cluster to the benchmark run %s, which waits for it and deletes it when it ends", clusterName, next)
				return true
			}
		}
	}
	uid := bl.l.UID
	_ = bl.leases.Delete(bg, lockName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	return false
}

var errBusy = errors.New("the benchmark lease is held")
