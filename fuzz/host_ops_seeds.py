#!/usr/bin/env python3
# Regenerates fuzz/corpus/fuzz_host_ops: scenarios encoded as fuzz_host_ops.cpp decodes them
# (FuzzedDataProvider takes integers from the end of the input). Keep in step with the harness.
# Encodes host-op scenarios the way FuzzedDataProvider decodes them (integers from the end).
import os
PAGE=4096; G=2<<20
class E:
    def __init__(s): s.stream=[]; s.real=0; s.slots=0; s.reqs=0; s.live_regs=0
    def v(s, val, rng):
        assert 0 <= val <= rng, (val, rng)
        nb=0
        while nb < 8 and (rng >> (8*nb)) > 0: nb+=1
        for i in range(nb-1,-1,-1): s.stream.append((val >> (8*i)) & 0xff)
    def b(s, x): s.v(1 if x else 0, 255)
    def op(s, k): s.v(k, 18)
    def data(s): return bytes(reversed(s.stream))
    # ---- ops ----
    def alloc(s, nbytes=100, align_log=12, big=False, bad_align_idx=None):
        s.op(0)
        if big: s.v(1,5); s.v(nbytes,PAGE)
        elif nbytes==0: s.v(0,5)
        else: s.v(2,5); s.v(nbytes-1, 3*PAGE+16)
        if bad_align_idx is not None: s.v(0,7); s.v(bad_align_idx,6)
        else: s.v(2,7); s.v(align_log,21)
        ok = nbytes!=0 and bad_align_idx is None
        if ok: s.real+=1
    def addr_base(s, blk=0, delta=None, asked=100):
        s.v(0,3); s.v(blk, s.real-1)
        if delta is None: s.b(True)
        else: s.b(False); s.v(delta, asked-1)
    def addr_arena(s, off): s.v(2,3); s.v(off, 32*PAGE-1)
    def free(s, **a): s.op(2); s.addr_base(**a)
    def query(s, lensel=1, **a): s.op(3); s.addr_base(**a); s.v(lensel,4)
    def ref(s, **a): s.op(4); s.addr_base(**a)
    def unref(s, **a): s.op(5); s.addr_base(**a)
    def stats(s): s.op(6)
    def reg(s, page, npages, dev=0):
        s.op(7); s.v(1,5); s.v(page,23); s.v(1,5); s.v(npages,8); s.v(dev,4)
    def reg_unaligned(s, off, n):
        s.op(7); s.v(0,5); s.v(off,23*PAGE); s.v(0,5); s.v(n,8*PAGE); s.v(0,4)
    def unreg(s, page, live_idx=None, delta_idx=0):
        s.op(8); s.v(1,5); s.v(page,31)
        if s.live_regs: 
            s.b(live_idx is not None)
            if live_idx is not None: s.v(live_idx, s.live_regs-1); s.v(delta_idx,4)
    def regq(s, off): s.op(9); s.v(off, 32*PAGE-1)
    def create(s, nbytes=1):
        s.op(10); s.v(1,7); s.v(nbytes-1, 2*G-1); s.v(1,7); s.slots+=1
    def pick_slots(s, ids):
        s.v(len(ids)-1, 2)
        for i in ids: s.v(i, s.slots-1)
    def release(s, ids, batch=False, accepted=True):
        s.op(11); s.pick_slots(ids)
        if len(ids)==1: s.b(batch)
        if accepted: s.reqs+=1
    def remap(s, ids, srcs, flags_idx=0, batch=False, accepted=True):
        # srcs: list of ('null'|'arena'|('blk',k,base)) , len_idx
        s.op(12); s.pick_slots(ids)
        for src,len_idx in srcs:
            if src=='null': s.v(0,5)
            elif src=='arena': s.v(1,5)
            else: s.v(2,5); s.v(src[1], s.real-1); s.v(1 if src[2] else 0, 7)
            s.v(len_idx,4)
        s.v(flags_idx,4)
        if len(ids)==1: s.b(batch)
        if accepted: s.reqs+=1
    def launch(s, r, idx=0): s.op(13); s.v(r, s.reqs-1); s.v(idx,3)
    def adopt(s, r): s.op(14); s.v(r, s.reqs-1)
    def destroy(s, r): s.op(15); s.v(r, s.reqs-1)
    def rquery(s, r): s.op(16); s.v(r, s.reqs-1)
    def close(s, i): s.op(17); s.v(i, s.slots-1)
    def write(s, i): s.op(18); s.v(i, s.slots-1)

D=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'fuzz_host_ops')
def save(name, e): open(os.path.join(D,name),'wb').write(e.data())
e=E(); e.alloc(100); e.query(); e.ref(blk=0, delta=50); e.free(blk=0); e.query(); e.stats(); e.unref(blk=0, delta=7); e.free(blk=0); e.stats(); save('pin_refs_outlive_free', e)
e=E(); e.alloc(0); e.alloc(10, bad_align_idx=1); e.alloc(5000, align_log=21); e.free(blk=0, delta=1, asked=5000); e.free(blk=0); e.free(blk=0); e.query(lensel=2); e.stats(); save('pin_invalid_and_double_free', e)
e=E(); e.reg(0,2); e.live_regs=1; e.reg(1,2); e.unreg(0, live_idx=0, delta_idx=4); e.regq(PAGE+5); e.reg_unaligned(100, PAGE); e.reg(4,1,dev=3); e.unreg(0, live_idx=0); e.live_regs=0; e.regq(0); save('reg_double_interior_unaligned', e)
e=E(); e.alloc(0 if False else 5, big=True); e.create(1); e.release([0]); e.remap([0], [(('blk',0,True),0)]); e.rquery(1); e.adopt(1); e.write(0); e.release([0]); e.remap([0], [(('blk',0,True),0)], flags_idx=2); e.launch(3); e.launch(3); e.adopt(3); e.close(0); save('slot_release_remap_adopt_deferred', e)
e=E(); e.alloc(5, big=True); e.create(100); e.create(G+1); e.release([0,0], accepted=False); e.remap([0], [(('blk',0,True),0)], accepted=False); e.release([0,1]); e.remap([0,1], [(('blk',0,False),0), (('blk',0,True),0)], accepted=False); e.remap([1,0], [(('blk',0,True),3), ('null',0)], accepted=False); e.remap([1], [(('blk',0,True),0)]); e.destroy(1); e.remap([1], [('arena',0)], accepted=False); e.close(1); e.close(1); save('slot_batch_duplicates_sources_busy', e)
print(sorted(os.listdir(D)))
