package render

import "sync"

// scratch holds the buffers Talos documents are written into before they are copied
// out into a string. A fresh buffer would be zeroed for every document of every render;
// these are reused instead. Nothing in them outlives a use: each use writes its buffer
// from the start.
var scratch = sync.Pool{New: func() any {
	b := make([]byte, 0, scratchSize)
	return &b
}}

// scratchSize fits a pool's Talos document (3-5 KiB); a bigger one is written into a
// grown copy, which is not kept.
const scratchSize = 8 << 10

// getScratch takes a buffer from the pool; putScratch returns it. The caller must not
// keep the buffer, or anything sliced from it, after putScratch.
func getScratch() *[]byte  { return scratch.Get().(*[]byte) }
func putScratch(p *[]byte) { scratch.Put(p) }
