package remote

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// NewCache returns the informer cache of the records bound to nodes other
// than node, as Records (CacheOptions). The caller starts it.
func NewCache(cfg *rest.Config, node string) (cache.Cache, error) {
	opts, err := CacheOptions(node)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("cache of other nodes' records: %w", err)
	}
	return c, nil
}

// CacheOptions are the options of NewCache's cache: a scheme of Records
// alone, the API server selecting the records labelled with a node other
// than node (OtherNodes), and their labels shared by node (Transform).
func CacheOptions(node string) (cache.Options, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return cache.Options{}, fmt.Errorf("scheme of other nodes' records: %w", err)
	}
	sel, err := OtherNodes(node)
	if err != nil {
		return cache.Options{}, err
	}
	return cache.Options{Scheme: s, ByObject: map[client.Object]cache.ByObject{
		&Record{}: {Label: sel, Transform: Transform()},
	}}, nil
}

// OtherNodes selects the records bound to a node (labelled with one) other
// than node. A selector of "not node" alone would take the records of no
// node too.
func OtherNodes(node string) (labels.Selector, error) {
	set, err := labels.NewRequirement(estuaryv1.LabelNode, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("selector of the records on a node: %w", err)
	}
	other, err := labels.NewRequirement(estuaryv1.LabelNode, selection.NotEquals, []string{node})
	if err != nil {
		return nil, fmt.Errorf("selector of the records on nodes other than %q: %w", node, err)
	}
	return labels.NewSelector().Add(*set, *other), nil
}

// Transform replaces a decoded Record's labels with its node's alone, one
// map shared by every record of the node, and drops its annotations.
func Transform() toolscache.TransformFunc {
	var (
		mu     sync.Mutex
		byNode = map[string]map[string]string{}
	)
	return func(obj any) (any, error) {
		r, ok := obj.(*Record)
		if !ok {
			return obj, nil
		}
		r.Annotations = nil
		n, labelled := r.Labels[estuaryv1.LabelNode]
		if !labelled {
			r.Labels = nil
			return r, nil
		}
		mu.Lock()
		defer mu.Unlock()
		m, ok := byNode[n]
		if !ok {
			m = map[string]string{estuaryv1.LabelNode: n}
			byNode[n] = m
		}
		r.Labels = m
		return r, nil
	}
}
