package remote

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// FuzzRecord: decoding an IPInstance as the daemon decodes other nodes'
// records (the scheme of Records) never panics; a record that decodes as a
// whole estuaryv1.IPInstance decodes as a Record too, holding what
// FromInstance keeps of it and its annotations; a decoded Record reads
// back from its own JSON encoding; and Transform leaves it its node alone.
func FuzzRecord(f *testing.F) {
	ipi := estuaryv1.IPInstance{TypeMeta: metav1.TypeMeta{APIVersion: estuaryv1.GroupVersion.String(), Kind: "IPInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.3", ResourceVersion: "42", UID: "u-1",
			Labels:      map[string]string{estuaryv1.LabelNode: "node-b", estuaryv1.LabelPod: "web-0"},
			Annotations: map[string]string{estuaryv1.AnnotationAddresses: "1"}},
		Spec: estuaryv1.IPInstanceSpec{Network: "overlay", Subnet: "overlay-v4",
			Address: estuaryv1.InstanceAddress{IP: "10.0.0.3/24", Version: 4, MAC: "02:00:00:00:00:03"},
			Binding: estuaryv1.Binding{Namespace: "default", PodName: "web-0", NodeName: "node-b"}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound}}
	whole, err := json.Marshal(&ipi)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(whole)
	gvk := `"apiVersion":"networking.estuary.io/v1","kind":"IPInstance"`
	for _, s := range []string{
		`{` + gvk + `,"metadata":{"name":"a","labels":{"networking.estuary.io/node":""}},"spec":{"address":{"ip":"not-an-ip"}}}`,
		`{` + gvk + `,"metadata":{"name":"a","labels":null},"spec":{"address":{"ip":"fd00::1/129"}},"status":{"phase":"Bogus"}}`,
		`{` + gvk + `,"metadata":{"name":"a"},"spec":{"address":{"ip":5}}}`,
		`{` + gvk + `,"metadata":{"name":"a"},"spec":{"address":{"ip":"10.0.0.3/24","IP":"10.0.0.4/24"}}}`,
		`{` + gvk + `,"metadata":{"name":"a","labels":{"networking.estuary.io/node":"x","networking.estuary.io/node":"y"}}}`,
		`{` + gvk + `,"metadata":[],"spec":null,"status":"Bound"}`,
		`{"apiVersion":"networking.estuary.io/v1","kind":"IPInstanceList","items":[{"metadata":{"name":"a"}}]}`,
		`{"apiVersion":"v1","kind":"Pod"}`, `{}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	records, instances := decoderOf(f, AddToScheme), decoderOf(f, estuaryv1.AddToScheme)
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := records.Decode(data, nil, nil)
		r, isRecord := obj.(*Record)
		if err != nil || !isRecord {
			r = nil
		}
		if iobj, _, ierr := instances.Decode(data, nil, nil); ierr == nil {
			if i, ok := iobj.(*estuaryv1.IPInstance); ok {
				want := FromInstance(i)
				want.Annotations = i.Annotations
				if r == nil || !reflect.DeepEqual(r, want) {
					t.Fatalf("%q: IPInstance %+v, Record %+v (%v); want %+v", data, i, r, err, want)
				}
			}
		}
		if r == nil {
			return
		}
		checkRecordRoundTrip(t, r)
	})
}

func checkRecordRoundTrip(t *testing.T, r *Record) {
	t.Helper()
	enc, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("encode %+v: %v", r, err)
	}
	var again Record
	err = json.Unmarshal(enc, &again)
	if err != nil || !reflect.DeepEqual(emptyMapsNil(again), emptyMapsNil(*r)) {
		t.Fatalf("%+v encodes as %s, which reads as %+v, %v", r, enc, again, err)
	}
	node, labelled := r.Labels[estuaryv1.LabelNode]
	out, err := Transform()(r)
	tr, ok := out.(*Record)
	if err != nil || !ok || tr.Annotations != nil || tr.Node() != node || len(tr.Labels) != map[bool]int{true: 1}[labelled] {
		t.Fatalf("Transform of a record of node %q (%v): %+v, %v", node, labelled, out, err)
	}
}

// emptyMapsNil is r with empty label and annotation maps nil: the JSON
// encoding leaves both out.
func emptyMapsNil(r Record) Record {
	if len(r.Labels) == 0 {
		r.Labels = nil
	}
	if len(r.Annotations) == 0 {
		r.Annotations = nil
	}
	return r
}

func decoderOf(f *testing.F, add func(*runtime.Scheme) error) runtime.Decoder {
	s := runtime.NewScheme()
	if err := add(s); err != nil {
		f.Fatal(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}
