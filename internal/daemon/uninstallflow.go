package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// uninstallAnswerTimeout bounds the Node patch that answers a request, and
// uninstallTimeout the removal itself, which a SIGTERM does not cut short.
const (
	uninstallAnswerTimeout = 10 * time.Second
	uninstallTimeout       = time.Minute
)

// RunUnlessUninstalled runs the daemon (Run) until ctx ends or an uninstall
// is requested on its DaemonSet (uninstallwatch.go). On a request, and
// from the start while one stands, it takes estuary off the node, answers
// on the node's Node and waits: it returns nil when ctx ends and
// ErrUninstallWithdrawn when the request is withdrawn.
func RunUnlessUninstalled(ctx context.Context, cfg Config, w *UninstallWatch) error {
	log := ctrl.Log.WithName("uninstall")
	if request, _ := w.Request(); request == "" {
		if err := runUntilRequested(ctx, cfg, w); err != nil || ctx.Err() != nil {
			return err
		}
	}
	idle := serveUninstalled(ctx, cfg.HealthAddr, w)
	defer idle()
	for {
		request, changed := w.Request()
		if request == "" {
			return ErrUninstallWithdrawn
		}
		log.Info("uninstall requested on the daemon's DaemonSet: taking estuary off the node", "request", request)
		st := estuaryv1.NodeUninstallStatus{Request: request}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uninstallTimeout)
		report, err := Uninstall(uctx, cfg)
		cancel()
		st.Done = report.String()
		if err != nil {
			st.Error = err.Error()
			log.Error(err, "uninstall incomplete", "done", st.Done)
		} else {
			log.Info("estuary removed from the node", "done", st.Done)
		}
		if err := w.Answer(ctx, cfg.NodeName, st); err != nil {
			log.Error(err, "answer the uninstall request on the Node")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// runUntilRequested runs the daemon until ctx ends or a request appears.
// A request ends the run without error.
func runUntilRequested(ctx context.Context, cfg Config, w *UninstallWatch) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			request, changed := w.Request()
			if request != "" {
				cancel()
				return
			}
			select {
			case <-runCtx.Done():
				return
			case <-changed:
			}
		}
	}()
	err := Run(runCtx, cfg)
	if r, _ := w.Request(); r != "" && ctx.Err() == nil {
		if err != nil {
			ctrl.Log.WithName("uninstall").Error(err, "the daemon stopped with an error for the uninstall")
		}
		return nil
	}
	return err
}

// Answer writes st on the Node, retrying until the patch lands or ctx ends:
// the requester waits for it.
func (w *UninstallWatch) Answer(ctx context.Context, node string, st estuaryv1.NodeUninstallStatus) error {
	value, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode uninstall status: %w", err)
	}
	// The answer also takes the daemon's own annotations off the Node: its
	// tunnel endpoint, BGP sessions and status describe a node estuary has
	// left.
	answer := string(value)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]*string{
			estuaryv1.AnnotationUninstalled:  &answer,
			estuaryv1.AnnotationVTEPIP:       nil,
			estuaryv1.AnnotationVTEPMAC:      nil,
			estuaryv1.AnnotationBGPPeers:     nil,
			estuaryv1.AnnotationDaemonStatus: nil,
		}}})
	if err != nil {
		return fmt.Errorf("encode Node patch: %w", err)
	}
	var last error
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 5 * time.Second}
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, uninstallAnswerTimeout)
		defer cancel()
		_, last = w.cs.CoreV1().Nodes().Patch(pctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return last == nil, nil
	})
	if last != nil {
		return fmt.Errorf("patch Node %s annotation %s: %w", node, estuaryv1.AnnotationUninstalled, last)
	}
	return err
}

// serveUninstalled answers the kubelet's probes while the daemon waits
// under a request: /healthz 200, so that it is not restarted in a loop,
// and /readyz 503 naming the request, since it serves nothing. It returns
// a function that stops the server.
func serveUninstalled(ctx context.Context, addr string, w *UninstallWatch) func() {
	if addr == "" || addr == "0" {
		return func() {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(rw, "ok: estuary is uninstalled from this node\n")
	})
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		r, _ := w.Request()
		http.Error(rw, fmt.Sprintf("not serving: uninstall %s requested on the DaemonSet", r), http.StatusServiceUnavailable)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.Log.WithName("uninstall").Error(err, "serve the probes while uninstalled", "address", addr)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
}
