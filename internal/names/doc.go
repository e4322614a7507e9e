// Package names owns the names, labels, annotations and kinds the operator puts on
// what it renders and recognises its objects by: render writes them, and apply, the
// controllers, the webhook and the tools read them from here, so none of those has to
// import render for a string.
package names
