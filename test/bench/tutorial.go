package main

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// tutorialReconciler is the controller of the classic PodSet tutorial (the
// seeds' blog walkthrough and Operator SDK tutorial), rebuilt line by line
// on the PodSet type of this project, so it needs no CRD of its own. Kept
// as the tutorial has it:
//
//   - pods listed by the labels app=<name>, version=v0.1; pending and
//     running pods count as available, readiness is never looked at;
//   - one pod per pass, named by generateName, then Requeue: true;
//   - scale-down deletes the surplus in one pass (the blog's version; in
//     the Operator SDK text the branch is nested and never runs);
//   - Status().Update of podNames and availableReplicas when
//     reflect.DeepEqual says the status changed;
//   - WithEventFilter(GenerationChangedPredicate{}) on every watch, and the
//     default controller options (one worker, the default rate limiter).
//
// What differs: the pod is made from the PodSet's template with the same
// hardening as every other contender's (the tutorial's last step, "limit
// container permissions"), so all contenders run the same pods; and the
// controller is named "tutorial", so that it can be built once per run.
type tutorialReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

func (r *tutorialReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrllog.FromContext(ctx)

	// Fetch the PodSet instance.
	instance := &podsetv1alpha1.PodSet{}
	err := r.Get(ctx, req.NamespacedName, instance)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	// List all pods owned by this PodSet instance.
	lbs := map[string]string{
		"app":     instance.Name,
		"version": "v0.1",
	}
	podList := &corev1.PodList{}
	listOps := &client.ListOptions{Namespace: instance.Namespace, LabelSelector: labels.SelectorFromSet(lbs)}
	if err = r.List(ctx, podList, listOps); err != nil {
		return ctrl.Result{}, err
	}

	// Count the pods that are pending or running as available.
	var available []corev1.Pod
	for _, pod := range podList.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending {
			available = append(available, pod)
		}
	}
	numAvailable := int32(len(available))
	availableNames := []string{}
	for _, pod := range available {
		availableNames = append(availableNames, pod.Name)
	}

	// Update the status if necessary.
	status := podsetv1alpha1.PodSetStatus{
		PodNames:          availableNames,
		AvailableReplicas: numAvailable,
	}
	if !reflect.DeepEqual(instance.Status, status) {
		instance.Status = status
		err = r.Status().Update(ctx, instance)
		if err != nil {
			log.Error(err, "Failed to update PodSet status")
			return ctrl.Result{}, err
		}
	}

	replicas := deref(instance.Spec.Replicas, 1)
	if numAvailable == replicas {
		return ctrl.Result{}, nil
	}

	// Scale down.
	if numAvailable > replicas {
		log.Info("Scaling down pods", "Currently available", numAvailable, "Required replicas", replicas)
		diff := numAvailable - replicas
		dpods := available[:diff]
		for i := range dpods {
			err = r.Delete(ctx, &dpods[i])
			if err != nil {
				log.Error(err, "Failed to delete pod", "pod.name", dpods[i].Name)
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the tutorial's way
	}

	// Scale up, one pod per pass.
	log.Info("Scaling up pods", "Currently available", numAvailable, "Required replicas", replicas)
	pod := newPodForCR(instance)
	if err := controllerutil.SetControllerReference(instance, pod, r.Scheme); err != nil {
		return ctrl.Result{}, err
	}
	err = r.Create(ctx, pod)
	if err != nil {
		log.Error(err, "Failed to create pod", "pod.name", pod.Name)
		return ctrl.Result{}, err
	}
	return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the tutorial's way
}

// newPodForCR returns a pod of the PodSet, named by generateName.
func newPodForCR(cr *podsetv1alpha1.PodSet) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range cr.Spec.Template.Labels {
		labels[k] = v
	}
	labels["app"] = cr.Name
	labels["version"] = "v0.1"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: cr.Name + "-pod-",
			Namespace:    cr.Namespace,
			Labels:       labels,
		},
		Spec: hardenedSpec(cr.Spec.Template.Spec),
	}
}

// SetupWithManager watches PodSets and the pods they own, filtered by the
// generation-changed predicate on everything, as the tutorial does.
func (r *tutorialReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&podsetv1alpha1.PodSet{}).
		Owns(&corev1.Pod{}).
		WithEventFilter(predicate.GenerationChangedPredicate{}).
		Named("tutorial").
		Complete(r)
}
