package cli

import (
	"context"
	"fmt"
	"io"
	"path"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// logConcurrency bounds the container logs read at once.
const logConcurrency = 4

// containerLog is one log to read: a container of a pod, its current or its
// previous instance.
type containerLog struct {
	pod       *corev1.Pod
	container string
	previous  bool
}

func (l containerLog) file() string {
	name := l.container + ".log"
	if l.previous {
		name = l.container + ".previous.log"
	}
	return path.Join("logs", l.pod.Namespace, l.pod.Name, name)
}

// logsOf lists a pod's logs: every container's current log, and the
// previous one of each container that restarted.
func logsOf(p *corev1.Pod) []containerLog {
	var out []containerLog
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		statuses[s.Name] = s
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		out = append(out, containerLog{pod: p, container: c.Name})
		if s, ok := statuses[c.Name]; ok && (s.RestartCount > 0 || s.LastTerminationState.Terminated != nil) {
			out = append(out, containerLog{pod: p, container: c.Name, previous: true})
		}
	}
	return out
}

// collectLogs writes every container log of pods, logConcurrency at a time.
func (d *dump) collectLogs(ctx context.Context, pods []corev1.Pod) {
	var logs []containerLog
	for i := range pods {
		logs = append(logs, logsOf(&pods[i])...)
	}
	sem := make(chan struct{}, logConcurrency)
	var wg sync.WaitGroup
	for _, l := range logs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.collectLog(ctx, l)
		})
	}
	wg.Wait()
}

// collectLog reads one log through pods/log, keeping its last
// --max-log-bytes, within --log-timeout.
func (d *dump) collectLog(ctx context.Context, l containerLog) {
	ctx, cancel := context.WithTimeout(ctx, d.f.logTimeout)
	defer cancel()
	opts := &corev1.PodLogOptions{Container: l.container, Previous: l.previous, Timestamps: true}
	if d.f.since > 0 {
		opts.SinceSeconds = ptr.To(int64(d.f.since.Seconds()))
	}
	what := fmt.Sprintf("log of %s/%s container %s", l.pod.Namespace, l.pod.Name, l.container)
	if l.previous {
		what = "previous " + what
	}
	stream, err := d.cs.CoreV1().Pods(l.pod.Namespace).GetLogs(l.pod.Name, opts).Stream(ctx)
	if err != nil {
		d.failed("%s: %v", what, err)
		return
	}
	defer func() { _ = stream.Close() }()
	buf := &tailBuffer{max: d.f.maxLogBytes}
	_, err = io.Copy(buf, stream)
	if buf.truncated() {
		d.mu.Lock()
		d.sum.Truncated = append(d.sum.Truncated, l.file())
		d.mu.Unlock()
	}
	if err != nil {
		d.failed("%s: read after %d bytes: %v", what, len(buf.buf)+int(buf.dropped), err)
		if len(buf.buf) == 0 {
			return
		}
	}
	d.addText(l.file(), string(buf.kept()))
	d.mu.Lock()
	d.sum.Logs = append(d.sum.Logs, l.file())
	d.mu.Unlock()
}
