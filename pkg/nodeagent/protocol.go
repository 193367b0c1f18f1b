// Package nodeagent is the Flock node agent: a process on each node
// (flock-node-agent, a DaemonSet in the server's namespace) that prepares
// the node-local data directories of Flock members on its node, so that a
// member's pod need not wait for a prepare helper pod to be scheduled,
// started, run and seen finished (issue 17: on real nodes that was most of
// a member's time to Ready).
//
// This file is the protocol between the Flock controller and the agent,
// written in a member's PersistentVolume:
//
//   - the controller makes the volume with AnnotationNode (the node whose
//     agent may prepare it), AnnotationOwner and AnnotationMode (what the
//     directory must become);
//   - the agent on that node creates the hostPath directory, gives it that
//     owner and mode, and sets AnnotationPrepared to "true", the mark the
//     controller sets itself after a prepare helper pod;
//   - the controller relies on the agent only while one is Ready on the
//     member's node (a pod of the agent's DaemonSet in its namespace, labelled
//     LabelComponent=ComponentNodeAgent) and for at most a grace period after
//     the volume was made; otherwise it runs the helper pod, as without an
//     agent. Both doing it is harmless: they set the same owner, mode and mark.
package nodeagent

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels and annotations of the protocol.
const (
	// LabelFlockUID is on every member PersistentVolume (the Flock's UID):
	// the agent watches the volumes that have it.
	LabelFlockUID = "flock.dev/uid"
	// AnnotationNode is the name of the node whose agent may prepare the
	// volume's directory. (An annotation, not a label: a node's name may be
	// longer than a label value.)
	AnnotationNode = "flock.dev/node"
	// AnnotationOwner is the directory's owner and group, "<uid>:<gid>".
	AnnotationOwner = "flock.dev/owner"
	// AnnotationMode is the directory's permission bits, in octal ("0770").
	AnnotationMode = "flock.dev/mode"
	// AnnotationPrepared is "true" once the directory has its owner and
	// mode.
	AnnotationPrepared = "flock.dev/prepared"
	// AnnotationRemoved is "true" once the directory was removed (Delete
	// retention); such a volume is never prepared again.
	AnnotationRemoved = "flock.dev/removed"

	// LabelComponent and ComponentNodeAgent mark the agent's pods.
	LabelComponent     = "flock.dev/component"
	ComponentNodeAgent = "node-agent"
)

// Request is what preparing a volume's directory means: Dir, with parents
// as kubelet makes them for a hostPath DirectoryOrCreate (root, 0755),
// owned by UID:GID with mode Mode.
type Request struct {
	Dir      string
	UID, GID int64
	Mode     os.FileMode
}

// SetRequest records in pv's annotations that the agent of node may
// prepare its directory with owner uid:gid and mode.
func SetRequest(pv *corev1.PersistentVolume, node string, uid, gid int64, mode int32) {
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	pv.Annotations[AnnotationNode] = node
	pv.Annotations[AnnotationOwner] = strconv.FormatInt(uid, 10) + ":" + strconv.FormatInt(gid, 10)
	pv.Annotations[AnnotationMode] = fmt.Sprintf("%#o", mode&0o777)
}

// HasRequest reports whether pv carries a request for the agent of node
// (a volume made before agents, or for another node, does not).
func HasRequest(pv *corev1.PersistentVolume, node string) bool {
	return pv.Annotations[AnnotationNode] == node && pv.Annotations[AnnotationOwner] != "" && pv.Annotations[AnnotationMode] != ""
}

// Pending reports whether the agent of node has to prepare pv: it asks for
// it, and is neither prepared, removed nor being deleted.
func Pending(pv *corev1.PersistentVolume, node string) bool {
	return HasRequest(pv, node) && pv.DeletionTimestamp == nil &&
		pv.Annotations[AnnotationPrepared] != "true" && pv.Annotations[AnnotationRemoved] != "true"
}

// RequestOf returns the request in pv for an agent whose data root is
// dataRoot. It refuses, naming why, a volume that is not a hostPath, whose
// path is not clean, absolute and strictly under dataRoot, or whose owner or
// mode does not parse: the agent runs as root and must never be made to
// change the owner of anything but a member's directory.
func RequestOf(pv *corev1.PersistentVolume, dataRoot string) (Request, error) {
	hp := pv.Spec.HostPath
	if hp == nil {
		return Request{}, fmt.Errorf("PersistentVolume %s is not a hostPath volume", pv.Name)
	}
	root := path.Clean(dataRoot)
	dir := hp.Path
	if !path.IsAbs(dir) || path.Clean(dir) != dir || root == "/" || !strings.HasPrefix(dir, root+"/") {
		return Request{}, fmt.Errorf("PersistentVolume %s: path %q is not a clean path under the data root %s", pv.Name, dir, root)
	}
	owner := pv.Annotations[AnnotationOwner]
	u, g, ok := strings.Cut(owner, ":")
	uid, uerr := strconv.ParseInt(u, 10, 64)
	gid, gerr := strconv.ParseInt(g, 10, 64)
	if !ok || uerr != nil || gerr != nil || uid < 0 || gid < 0 || uid > 1<<31-1 || gid > 1<<31-1 {
		return Request{}, fmt.Errorf("PersistentVolume %s: annotation %s=%q is not <uid>:<gid>", pv.Name, AnnotationOwner, owner)
	}
	mode, err := strconv.ParseUint(pv.Annotations[AnnotationMode], 8, 32)
	if err != nil || mode > 0o777 {
		return Request{}, fmt.Errorf("PersistentVolume %s: annotation %s=%q is not an octal mode of at most 0777", pv.Name, AnnotationMode, pv.Annotations[AnnotationMode])
	}
	return Request{Dir: dir, UID: uid, GID: gid, Mode: os.FileMode(mode)}, nil
}
