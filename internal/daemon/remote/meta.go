package remote

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The metav1.Object of a Record: the name, resource version, labels and
// annotations it keeps; every other field reads as empty, and setting it
// does nothing.

var _ metav1.Object = &Record{}

// meta is what a Record keeps of the record's metadata. Annotations are
// decoded for the watch's bookmarks (the reflector reads the end of a
// watch list's initial events in one) and dropped from stored records
// (Transform).
type meta struct {
	Name            string            `json:"name"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
}

func (m *meta) GetName() string               { return m.Name }
func (m *meta) SetName(name string)           { m.Name = name }
func (m *meta) GetResourceVersion() string    { return m.ResourceVersion }
func (m *meta) SetResourceVersion(v string)   { m.ResourceVersion = v }
func (m *meta) GetLabels() map[string]string  { return m.Labels }
func (m *meta) SetLabels(l map[string]string) { m.Labels = l }
func (m *meta) GetNamespace() string          { return "" }
func (m *meta) SetNamespace(string)           {}
func (m *meta) GetGenerateName() string       { return "" }
func (m *meta) SetGenerateName(string)        {}
func (m *meta) GetUID() types.UID             { return "" }
func (m *meta) SetUID(types.UID)              {}
func (m *meta) GetGeneration() int64          { return 0 }
func (m *meta) SetGeneration(int64)           {}
func (m *meta) GetSelfLink() string           { return "" }
func (m *meta) SetSelfLink(string)            {}
func (m *meta) GetCreationTimestamp() metav1.Time {
	return metav1.Time{}
}
func (m *meta) SetCreationTimestamp(metav1.Time)            {}
func (m *meta) GetDeletionTimestamp() *metav1.Time          { return nil }
func (m *meta) SetDeletionTimestamp(*metav1.Time)           {}
func (m *meta) GetDeletionGracePeriodSeconds() *int64       { return nil }
func (m *meta) SetDeletionGracePeriodSeconds(*int64)        {}
func (m *meta) GetAnnotations() map[string]string           { return m.Annotations }
func (m *meta) SetAnnotations(a map[string]string)          { m.Annotations = a }
func (m *meta) GetFinalizers() []string                     { return nil }
func (m *meta) SetFinalizers([]string)                      {}
func (m *meta) GetOwnerReferences() []metav1.OwnerReference { return nil }
func (m *meta) SetOwnerReferences([]metav1.OwnerReference)  {}
func (m *meta) GetManagedFields() []metav1.ManagedFieldsEntry {
	return nil
}
func (m *meta) SetManagedFields([]metav1.ManagedFieldsEntry) {}
