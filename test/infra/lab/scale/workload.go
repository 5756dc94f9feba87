package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The scale networks beside the lab's default overlay (overlay-v4,
// 10.78.0.0/16): two untagged VLAN underlays, each the domain of half the
// fake nodes, with a /16 each.
var underlays = []struct{ network, subnet, cidr, gateway, domain string }{
	{"scale-underlay-a", "scale-underlay-a-v4", "10.80.0.0/16", "10.80.0.1", "a"},
	{"scale-underlay-b", "scale-underlay-b-v4", "10.81.0.0/16", "10.81.0.1", "b"},
}

// createNetworks creates the underlay networks and their subnets.
func createNetworks(ctx context.Context, c client.Client) error {
	for _, u := range underlays {
		nw := &estuaryv1.Network{
			ObjectMeta: metav1.ObjectMeta{Name: u.network},
			Spec: estuaryv1.NetworkSpec{
				Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
				NodeSelector: map[string]string{domainLabel: u.domain},
			},
		}
		sn := &estuaryv1.Subnet{
			ObjectMeta: metav1.ObjectMeta{Name: u.subnet},
			Spec: estuaryv1.SubnetSpec{Network: u.network, Range: estuaryv1.AddressRange{
				Version: 4, CIDR: u.cidr, Gateway: estuaryv1.IPAddress(u.gateway),
			}},
		}
		for _, o := range []client.Object{nw, sn} {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
			}
		}
	}
	return nil
}

// deployment is scale Deployment i of replicas pause pods: i mod 3 picks
// the overlay (no annotation: the cluster default), underlay a or b. Its
// pods select and tolerate the fake nodes only.
func deployment(ns, name string, i int, replicas int32) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	ann := map[string]string{}
	if k := i % 3; k > 0 {
		ann[estuaryv1.AnnotationNetwork] = underlays[k-1].network
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: ann},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{fakeLabel: fakeValue},
					Tolerations: []corev1.Toleration{{
						Key: kwokAnnotation, Operator: corev1.TolerationOpEqual, Value: kwokValue,
						Effect: corev1.TaintEffectNoSchedule,
					}},
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "pause", Image: "estuary-lab.local/pause:lab"}},
				},
			},
		},
	}
}

// podTimes is what the tracker saw of one pod: when it appeared, when it
// was seen bound to a node, and when its first Bound IPInstance appeared.
type podTimes struct {
	created, scheduled, bound time.Time
}

// tracker watches the scale namespace's pods and their IPInstances and
// records, per pod, when each step was first seen.
type tracker struct {
	mu        sync.Mutex
	pods      map[string]*podTimes // namespace/name
	instances map[string]string    // IPInstance name: pod key, while it is Bound
}

func newTracker() *tracker {
	return &tracker{pods: map[string]*podTimes{}, instances: map[string]string{}}
}

func (t *tracker) entry(key string) *podTimes {
	p := t.pods[key]
	if p == nil {
		p = &podTimes{}
		t.pods[key] = p
	}
	return p
}

func (t *tracker) pod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(p.Namespace + "/" + p.Name)
	if e.created.IsZero() {
		e.created = now
	}
	if p.Spec.NodeName != "" && e.scheduled.IsZero() {
		e.scheduled = now
	}
}

var ipinstances = schema.GroupVersionResource{Group: estuaryv1.GroupVersion.Group, Version: estuaryv1.GroupVersion.Version, Resource: "ipinstances"}

func (t *tracker) instance(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	l := u.GetLabels()
	key := l[estuaryv1.LabelNamespace] + "/" + l[estuaryv1.LabelPod]
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if phase != string(estuaryv1.IPInstanceBound) || l[estuaryv1.LabelPod] == "" {
		delete(t.instances, u.GetName())
		return
	}
	t.instances[u.GetName()] = key
	if e := t.entry(key); e.bound.IsZero() {
		e.bound = now
	}
}

func (t *tracker) instanceGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		t.mu.Lock()
		delete(t.instances, u.GetName())
		t.mu.Unlock()
	}
}

// bound is how many IPInstances of the namespace are Bound now.
func (t *tracker) boundNow() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.instances)
}

// boundAmong counts the pods of keys whose address has been Bound.
func (t *tracker) boundAmong(match func(string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, p := range t.pods {
		if match(k) && !p.bound.IsZero() {
			n++
		}
	}
	return n
}

// times returns a copy of the records of the pods matching match.
func (t *tracker) times(match func(string) bool) []podTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []podTimes
	for k, p := range t.pods {
		if match(k) {
			out = append(out, *p)
		}
	}
	return out
}

// start runs the informers until ctx ends and waits for their first list.
func (t *tracker) start(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string) error {
	pf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	pi := pf.Core().V1().Pods().Informer()
	// Keep only what the tracker reads: 50,000 whole pods would weigh
	// more than the cluster under test.
	if err := pi.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
				Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
			}, nil
		}
		return obj, nil
	}); err != nil {
		return fmt.Errorf("pod informer transform: %w", err)
	}
	if _, err := pi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.pod,
		UpdateFunc: func(_, n any) { t.pod(n) },
	}); err != nil {
		return fmt.Errorf("pod informer handler: %w", err)
	}
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", func(o *metav1.ListOptions) {
		o.LabelSelector = estuaryv1.LabelNamespace + "=" + ns
	})
	ii := df.ForResource(ipinstances).Informer()
	if _, err := ii.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.instance,
		UpdateFunc: func(_, n any) { t.instance(n) },
		DeleteFunc: t.instanceGone,
	}); err != nil {
		return fmt.Errorf("IPInstance informer handler: %w", err)
	}
	pf.Start(ctx.Done())
	df.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pi.HasSynced, ii.HasSynced) {
		return fmt.Errorf("informers did not sync: %w", ctx.Err())
	}
	return nil
}

// createDeployments creates deps with workers in parallel.
func createDeployments(ctx context.Context, c client.Client, deps []*appsv1.Deployment, workers int) error {
	return parallel(ctx, len(deps), workers, func(i int) error {
		if err := c.Create(ctx, deps[i]); err != nil {
			return fmt.Errorf("create deployment %s: %w", deps[i].Name, err)
		}
		return nil
	})
}

// deleteDeployments deletes deps, their pods in the foreground.
func deleteDeployments(ctx context.Context, c client.Client, deps []*appsv1.Deployment, workers int) error {
	return parallel(ctx, len(deps), workers, func(i int) error {
		err := c.Delete(ctx, deps[i], client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete deployment %s: %w", deps[i].Name, err)
		}
		return nil
	})
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error.
func parallel(ctx context.Context, n, workers int, fn func(int) error) error {
	jobs := make(chan int)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// latency is the distribution of one step over many pods.
type latency struct {
	n             int
	p50, p99, max time.Duration
}

func latencyOf(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return latency{n: len(ds), p50: at(0.5), p99: at(0.99), max: ds[len(ds)-1]}
}

func (l latency) String() string {
	if l.n == 0 {
		return "no pods"
	}
	return fmt.Sprintf("p50 %s, p99 %s, max %s (%d pods)", round(l.p50), round(l.p99), round(l.max), l.n)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// storm sums up one wave of pods: each step's latency and the rates.
type storm struct {
	pods               int
	createdToBound     latency // pod seen -> its IPInstance Bound
	scheduledToBound   latency // pod seen on a node -> its IPInstance Bound
	createdToScheduled latency
	wall               time.Duration // first pod seen -> last address Bound
	rate, sustained    float64       // pods/s over wall; between the 10th and 90th percentile of Bound
}

func stormOf(ts []podTimes) storm {
	var cb, sb, cs []time.Duration
	var first, last time.Time
	var bounds []time.Time
	for _, p := range ts {
		if p.created.IsZero() || p.bound.IsZero() {
			continue
		}
		cb = append(cb, p.bound.Sub(p.created))
		if !p.scheduled.IsZero() {
			sb = append(sb, max(0, p.bound.Sub(p.scheduled)))
			cs = append(cs, p.scheduled.Sub(p.created))
		}
		if first.IsZero() || p.created.Before(first) {
			first = p.created
		}
		if p.bound.After(last) {
			last = p.bound
		}
		bounds = append(bounds, p.bound)
	}
	s := storm{pods: len(cb), createdToBound: latencyOf(cb), scheduledToBound: latencyOf(sb), createdToScheduled: latencyOf(cs)}
	if len(bounds) < 2 {
		return s
	}
	s.wall = last.Sub(first)
	s.rate = float64(len(bounds)) / s.wall.Seconds()
	slices.SortFunc(bounds, func(a, b time.Time) int { return a.Compare(b) })
	lo, hi := len(bounds)/10, len(bounds)*9/10
	if d := bounds[hi].Sub(bounds[lo]).Seconds(); hi > lo && d > 0 {
		s.sustained = float64(hi-lo) / d
	}
	return s
}
