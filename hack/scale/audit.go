package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodegroup-io/nodegroup-operator/internal/localrun"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

const bareUser = "system:serviceaccount:" + localrun.ReleaseNamespace + ":" + bareServiceAccount

// tenantUser is who the operator is to the tenant API server (tenantServiceAccount).
const tenantUser = "system:serviceaccount:" + localrun.ReleaseNamespace + ":" + tenantServiceAccount

// verb is the request's verb, with a dry run told apart: it writes nothing.
func (e *auditEvent) verb() string {
	if e.dryRun() {
		return e.Verb + " (dry run)"
	}
	return e.Verb
}

func (e *auditEvent) dryRun() bool { return strings.Contains(e.RequestURI, "dryRun=All") }

// write: a request that changes stored state. A review stores nothing: the operator
// creates TokenReviews and SubjectAccessReviews to check who scrapes its metrics.
func (e *auditEvent) write() bool {
	if strings.HasSuffix(e.resource(), "reviews") {
		return false
	}
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return !e.dryRun()
	}
	return false
}

// code is the response's HTTP status code; 0 when the event has none.
func (e *auditEvent) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// timedOut: a request the API server gave up on (a 504, or a 500 with the reason
// ServerTimeout: apierrors.IsTimeout and IsServerTimeout).
func (e *auditEvent) timedOut() bool {
	if e.ResponseStatus == nil {
		return false
	}
	return e.code() == 504 || e.ResponseStatus.Reason == string(metav1.StatusReasonTimeout) ||
		e.ResponseStatus.Reason == string(metav1.StatusReasonServerTimeout)
}

// stored: a write the API server accepted.
func (e *auditEvent) stored() bool { return e.write() && e.code() >= 200 && e.code() < 300 }

// leaderElection: a write of the leader election, the lease or the event announcing a
// new leader, which are not the operator's work on pools.
func (e *auditEvent) leaderElection() bool {
	switch e.resource() {
	case "leases":
		return true
	case "events":
		return strings.HasPrefix(e.ObjectRef.Name, leaderElectionID+".")
	}
	return false
}

// leaderElectionID is the operator's lease name (cmd/nodegroup-operator).
const leaderElectionID = "nodegroup-operator.nodegroup.io"

func (e *auditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Resource
}

// readAudit calls f for every complete event of the audit log from offset on and
// returns the offset after the last complete line.
func readAudit(path string, offset int64, f func(*auditEvent)) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return offset, err
	}
	defer func() { _ = file.Close() }()
	if _, err := file.Seek(offset, io.SeekStart); err != nil {
		return offset, err
	}
	r := bufio.NewReaderSize(file, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return offset, nil // an incomplete last line is read next time
		}
		if err != nil {
			return offset, err
		}
		offset += int64(len(line))
		var e auditEvent
		if err := json.Unmarshal(bytes.TrimSpace(line), &e); err != nil {
			return offset, fmt.Errorf("audit log line at %d: %w", offset, err)
		}
		if e.Stage == "ResponseComplete" || e.Stage == "Panic" {
			f(&e)
		}
	}
}

// auditTail follows the audit log for the operator's writes, each call reading on from
// where the last stopped.
type auditTail struct {
	path   string
	offset int64
}

// lastOperatorWrite reads the events written since the last call and returns the time
// of the operator's last write among them (zero when none), leader election aside.
func (t *auditTail) lastOperatorWrite() (time.Time, error) {
	var last time.Time
	var err error
	t.offset, err = readAudit(t.path, t.offset, func(e *auditEvent) {
		if e.User.Username == localrun.OperatorUser && e.write() && !e.leaderElection() && e.StageTimestamp.After(last) {
			last = e.StageTimestamp
		}
	})
	return last, err
}

// analyse reads the whole audit log once and counts, per phase, the requests of the
// operator by verb and its writes, the bare client's requests, which pools the change
// wave's writes reached, and during the churn what the operator wrote against the
// changes its clients made, pool by pool. A write of the operator outside every phase (leader
// election aside) is an anomaly: no phase would count it.
func (h *harness) analyse(context.Context) error {
	phases := map[string]*Phase{
		phaseBare: &h.res.Bare, phaseBareAgain: &h.res.BareAgain, phaseCold: &h.res.Cold, phaseColdTail: &h.res.ColdTail,
		phaseSteady: &h.res.Steady, phaseWave: &h.res.Wave.Phase, phaseWaveTail: &h.res.WaveTail,
		phaseRestart: &h.res.Restart, phaseChurnRestart: &h.res.ChurnRestart, phaseChurn: &h.res.Churn.Phase, phaseChurnTail: &h.res.Churn.Phase,
	}
	for _, p := range phases {
		p.Requests = map[string]int{}
	}
	in := func(e *auditEvent) *window {
		for i := range h.windows {
			w := &h.windows[i]
			if !e.RequestReceivedTimestamp.Before(w.start) && e.RequestReceivedTimestamp.Before(w.end) {
				return w
			}
		}
		return nil
	}
	var outside int
	var outsideSample []string
	_, err := readAudit(h.auditPath, 0, func(e *auditEvent) {
		w := in(e)
		if w == nil {
			if e.User.Username == localrun.OperatorUser && e.write() && !e.leaderElection() {
				if e.resource() == "events" {
					// client-go's event broadcaster patches an event series on its own
					// timer (every few minutes), whatever phase it is: counted, not state.
					h.res.EventWritesOutside++
					return
				}
				outside++
				if len(outsideSample) < 10 {
					outsideSample = append(outsideSample, h.describeOutside(e))
				}
			}
			return
		}
		p := phases[w.name]
		bare := w.name == phaseBare || w.name == phaseBareAgain
		churn := w.name == phaseChurn || w.name == phaseChurnTail
		switch {
		case bare && e.User.Username == bareUser:
			p.Requests[e.verb()]++
			if e.write() {
				p.Writes++
			}
		case !bare && e.User.Username == localrun.OperatorUser:
			p.Requests[e.verb()]++
			switch {
			case !e.write():
			case e.leaderElection():
				p.LeaseWrites++
			default:
				p.Writes++
				if e.resource() == "events" {
					p.EventWrites++
				}
				if w.name == phaseWave || w.name == phaseWaveTail {
					h.attribute(e)
				}
				if churn {
					h.countChurnWrite(e)
				}
			}
		case !bare && e.User.Username == tenantUser:
			p.TenantRequests++
			if e.write() {
				p.TenantWrites++
			}
		case !bare && e.User.Username == bareUser:
			h.res.Anomalies = append(h.res.Anomalies, fmt.Sprintf("the bare client sent %s %s outside its phase", e.Verb, e.RequestURI))
		case e.User.Username == autoscalerUser || e.User.Username == capiUser:
			if churn {
				h.countChurnChange(e)
			} else {
				h.res.Anomalies = append(h.res.Anomalies, fmt.Sprintf("%s sent %s %s outside the churn", e.User.Username, e.Verb, e.RequestURI))
			}
		}
	})
	h.judgeChurn()
	if outside > 0 {
		h.res.Anomalies = append(h.res.Anomalies, fmt.Sprintf("the operator sent %d writes outside every measured phase, e.g. %v", outside, outsideSample))
	}
	return err
}

// describeOutside names a write no phase counts, and when it came: which phase it
// followed and by how long, so a late or early write can be told from a stray one.
func (h *harness) describeOutside(e *auditEvent) string {
	what := e.Verb + " " + e.RequestURI
	if e.ObjectRef != nil && e.ObjectRef.Name != "" {
		what += " (" + e.ObjectRef.Name + ")"
	}
	var last *window
	for i := range h.windows {
		w := &h.windows[i]
		if !w.end.After(e.RequestReceivedTimestamp) && (last == nil || w.end.After(last.end)) {
			last = w
		}
	}
	if last == nil {
		return what + " before the first phase"
	}
	return fmt.Sprintf("%s %s after the end of %s", what, e.RequestReceivedTimestamp.Sub(last.end).Round(time.Millisecond), last.name)
}

// attribute counts a write of the change wave against the pool it concerns: changed,
// untouched, or none (a tenant's Secret, a control plane).
func (h *harness) attribute(e *auditEvent) {
	w := &h.res.Wave
	p := h.poolOf(e)
	switch {
	case p == nil && e.resource() == "events":
		// An event of a Cluster (its identity, its autoscaler) or a series the event
		// broadcaster patches on its own timer: no pool's state.
	case p == nil:
		w.WritesOther++
		if len(w.WritesOtherSample) < 10 {
			w.WritesOtherSample = append(w.WritesOtherSample, e.Verb+" "+e.RequestURI)
		}
	case p.bumped:
		w.WritesChanged++
	default:
		w.WritesUntouched++
		if len(w.WritesUntouchedSample) < 10 {
			w.WritesUntouchedSample = append(w.WritesUntouchedSample, e.Verb+" "+e.RequestURI)
		}
	}
}

// poolOf finds the pool an object belongs to by its name: the pool itself, its
// MachineDeployment and health check (<cluster>-<pool>), its templates
// (<pool>-<hash>) and its events (<pool>.<hex>).
func (h *harness) poolOf(e *auditEvent) *pool {
	if e.ObjectRef == nil {
		return nil
	}
	ns, name := e.ObjectRef.Namespace, e.ObjectRef.Name
	var candidate string
	switch e.ObjectRef.Resource {
	case "nodegroups":
		candidate = name
	case "machinedeployments", "machinehealthchecks":
		candidate = strings.TrimPrefix(name, testenv.TenantCluster+"-")
	case "talosconfigtemplates", "kairosconfigtemplates", "kubevirtmachinetemplates":
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			candidate = name[:i]
		}
	case "events":
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			candidate = name[:i]
		}
	}
	return h.byKey[ns+"/"+candidate]
}
