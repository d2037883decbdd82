package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "podset.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name that generated code
	// (the apply configurations in applyconfig/) refers to.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers this API's types with a runtime.Scheme. It
	// is apimachinery's builder, not controller-runtime's (deprecated), so
	// that importing the API brings in no controller library.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers PodSet and PodSetList under GroupVersion.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &PodSet{}, &PodSetList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
