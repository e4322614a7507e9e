// Package inuse keeps NodeGroupClasses and Locations that pools still name from being
// deleted (DESIGN.md section 6): such an object carries the finalizer Finalizer and a
// condition InUse that lists the pools naming it.
//
//   - The finalizer is added while at least one NodeGroup, in any namespace, names the
//     object, and removed when none does. A deletion requested meanwhile is held by it:
//     the object stays with its deletionTimestamp, the condition says which pools it
//     waits for, an event says so once per change, and when the last pool is gone the
//     finalizer goes and the API server removes the object. A deleting pool still names
//     its class and location: its machines run until it is gone.
//   - The built-in classes (talos, kairos) and location (in-cluster) get exactly the same
//     protection while used. The controller never deletes anything: it only adds or
//     removes its own finalizer and writes the condition.
//   - Status is written only when the condition changes (status, reason, message or
//     observedGeneration), so a resync writes nothing.
//   - The finalizer is patched with an optimistic lock: the finalizer list is shared
//     with others, and a merge patch replaces it whole. Releasing a deleting object is
//     the one step that cannot be undone, so the pool count the cache gave is confirmed
//     against the API server before it.
//
// One generic controller, instantiated twice (for classes and for locations), because
// the two differ only in the kind, the NodeGroup field that names them and where their
// conditions live. Two instances rather than one controller for both kinds, because a
// controller's request carries no kind: the two queues keep a class and a location of
// the same name apart.
//
// Pools are found through the operator's NodeGroup field indexes operator.PoolsByClass
// and operator.PoolsByLocation, the ones the nodegroup controller lists by.
//
// What it cannot do: a deletion that reaches an object before any pool named it, or
// before this controller added the finalizer, is not held (a finalizer cannot be added
// to an object being deleted). Refusing such deletions is admission's work.
package inuse
