# tests/harden_craft.py MODE IN OUT: a copy of trace IN with one fault planted (tests/cli_harden.sh).
# Every copy is written with h5py, not with the project's writer, so the reader is tested
# against what any HDF5 writer can produce.
import sys
import h5py
import numpy as np
import zlib

mode, src, dst = sys.argv[1:4]


def lookup3(k):
    """Jenkins' lookup3 hashlittle with initial value 0: HDF5's metadata checksum."""
    M = 0xffffffff
    rot = lambda x, r: ((x << r) | (x >> (32 - r))) & M
    n = len(k)
    a = b = c = (0xdeadbeef + n) & M
    i = 0
    while n > 12:
        a = (a + int.from_bytes(k[i:i + 4], "little")) & M
        b = (b + int.from_bytes(k[i + 4:i + 8], "little")) & M
        c = (c + int.from_bytes(k[i + 8:i + 12], "little")) & M
        a = (a - c) & M; a ^= rot(c, 4); c = (c + b) & M
        b = (b - a) & M; b ^= rot(a, 6); a = (a + c) & M
        c = (c - b) & M; c ^= rot(b, 8); b = (b + a) & M
        a = (a - c) & M; a ^= rot(c, 16); c = (c + b) & M
        b = (b - a) & M; b ^= rot(a, 19); a = (a + c) & M
        c = (c - b) & M; c ^= rot(b, 4); b = (b + a) & M
        n -= 12
        i += 12
    if n == 0:
        return c
    t = k[i:i + n] + bytes(12 - n)
    a = (a + int.from_bytes(t[0:4], "little")) & M
    b = (b + int.from_bytes(t[4:8], "little")) & M
    c = (c + int.from_bytes(t[8:12], "little")) & M
    c ^= b; c = (c - rot(b, 14)) & M
    a ^= c; a = (a - rot(c, 11)) & M
    b ^= a; b = (b - rot(a, 25)) & M
    c ^= b; c = (c - rot(b, 16)) & M
    a ^= c; a = (a - rot(c, 4)) & M
    b ^= a; b = (b - rot(a, 14)) & M
    c ^= b; c = (c - rot(b, 24)) & M
    return c


# A global heap collection (no checksum) claiming 2 GiB: HDF5 would allocate that to read it.
if mode == "gcol_size":
    d = bytearray(open(src, "rb").read())
    i = d.find(b"GCOL\x01\x00\x00\x00")
    assert i >= 0, "no global heap collection"
    d[i + 8:i + 16] = (1 << 31).to_bytes(8, "little")
    open(dst, "wb").write(d)
    sys.exit(0)


# Byte-level faults in a file the project wrote (version-2 object headers, checksummed):
# a damaged message with its header's checksum recomputed, as a crafted file can have it, so
# that HDF5's checksum does not catch it and the pre-check (traces/h5pre.c) must.
if mode in ("forged_compound", "forged_dspace_rank", "forged_chunk_elem"):
    with h5py.File(src, "r") as f:
        off = h5py.h5o.get_info(f["req/0/g/0/index"].id).addr
    d = bytearray(open(src, "rb").read())
    assert d[off:off + 4] == b"OHDR" and d[off + 4] == 2, "not a version-2 object header"
    fl = d[off + 5]
    q = off + 6 + (16 if fl & 0x20 else 0) + (4 if fl & 0x10 else 0)
    w = 1 << (fl & 3)
    size = int.from_bytes(d[q:q + w], "little")
    start = q + w
    end = start + size
    p, hit = start, False
    while end - p >= 4 + (2 if fl & 4 else 0):
        typ, msize = d[p], int.from_bytes(d[p + 1:p + 3], "little")
        body = p + 4 + (2 if fl & 4 else 0)
        if mode == "forged_compound" and typ == 3 and d[body] & 15 == 6:
            d[body + 1:body + 3] = (200).to_bytes(2, "little")   # 200 members in a 4-member type
            hit = True
        if mode == "forged_chunk_elem" and typ == 8 and d[body] == 4 and d[body + 1] == 2:
            nd, w = d[body + 3], d[body + 4]
            last = body + 5 + w * (nd - 1)                        # a chunk's element size, +1
            d[last:last + w] = (int.from_bytes(d[last:last + w], "little") + 1).to_bytes(w, "little")
            hit = True
        if mode == "forged_dspace_rank" and typ == 1:
            d[body + 1] = 40                                      # rank 40, above HDF5's 32
            hit = True
        p = body + msize
    assert hit, "message not found"
    d[end:end + 4] = lookup3(bytes(d[off:end])).to_bytes(4, "little")
    open(dst, "wb").write(d)
    sys.exit(0)


def copy(f, g, skip_attr=(), skip=()):
    for k, v in f.attrs.items():
        if k not in skip_attr:
            g.attrs[k] = v
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and name not in skip:
            g.create_dataset(name, data=obj[()])
    f.visititems(visit)


# An old-format file (version-1 object headers, no checksums) whose dense group (creation
# order tracked, more than 8 links) holds a dataset with a damaged dataspace: only a walk
# through the group's fractal heap reaches that header (dense_v1_forged); dense_v1 is the
# same file undamaged, which must check ok.
if mode in ("dense_v1", "dense_v1_forged"):
    with h5py.File(src, "r") as f, h5py.File(dst, "w", libver="earliest") as g:
        copy(f, g)
        notes = g.create_group("notes", track_order=True)
        for i in range(10):
            notes.create_dataset(f"d{i}", data=np.arange(4, dtype=np.uint32))
    if mode == "dense_v1_forged":
        with h5py.File(dst, "r") as f:
            off = h5py.h5o.get_info(f["notes/d5"].id).addr
        d = bytearray(open(dst, "rb").read())
        assert d[off] == 1, "not a version-1 object header"
        p, end, hit = off + 16, off + 16 + int.from_bytes(d[off + 8:off + 12], "little"), False
        while end - p >= 8:
            typ, msize = int.from_bytes(d[p:p + 2], "little"), int.from_bytes(d[p + 2:p + 4], "little")
            if typ == 1:
                d[p + 8 + 1] = 40                                 # rank 40, above HDF5's 32
                hit = True
            p += 8 + msize
        assert hit, "no dataspace message"
        open(dst, "wb").write(d)
    sys.exit(0)


# The latest file format stores large attributes densely (the 1 MiB string below).
with h5py.File(src, "r") as f, h5py.File(dst, "w", libver="latest") as g:
    if mode == "attr_array":          # a scalar attribute stored as an array of four
        copy(f, g, skip_attr=("n_requests",))
        g.attrs["n_requests"] = np.array([2, 2, 2, 2], dtype=np.uint32)
    elif mode == "attr_empty":        # a string attribute as an empty array
        copy(f, g, skip_attr=("model",))
        g.attrs.create("model", np.array([], dtype=h5py.string_dtype()), shape=(0,))
    elif mode == "attr_str_array":    # a string attribute as an array of three strings
        copy(f, g, skip_attr=("generator",))
        g.attrs["generator"] = np.array(["a", "b", "c"], dtype=h5py.string_dtype())
    elif mode == "attr_wide_str":     # a fixed-length string attribute of 1 MiB
        copy(f, g, skip_attr=("preset",))
        g.attrs["preset"] = np.bytes_(b"x" * (1 << 20))
    elif mode in ("index_signed", "index_missing", "index_wide"):
        copy(f, g, skip=("req/0/g/0/index",))
        ix = f["req/0/g/0/index"][()]
        if mode == "index_signed":
            dt = [("offset", "<u8"), ("n_added", "<i4"), ("n_removed", "<u4"), ("keyframe", "u1")]
        elif mode == "index_missing":
            dt = [("offset", "<u8"), ("n_added", "<u4"), ("n_removed", "<u4")]
        else:
            dt = [("offset", "<u8"), ("n_added", "<u8"), ("n_removed", "<u4"), ("keyframe", "u1")]
        out = np.zeros(len(ix), dtype=dt)
        for name, _ in dt:
            out[name] = ix[name]
        g.create_dataset("req/0/g/0/index", data=out)
    elif mode == "rows_after_last":   # rows stored after every stream's last position
        streams = [f"req/{r}/g/{k}/rows" for r in range(int(f.attrs["n_requests"])) for k in range(int(f.attrs["n_groups"]))]
        copy(f, g, skip=tuple(streams))
        for s in streams:
            g.create_dataset(s, data=np.concatenate([f[s][()], np.array([1, 2, 3], dtype=np.uint32)]))
    elif mode == "rows_short_chunk":  # a stream's rows chunk that inflates short, its deflate valid
        s = f["req/0/g/0/rows"]
        copy(f, g, skip=(s.name[1:],))
        d = g.create_dataset(s.name, data=s[()], chunks=s.chunks, maxshape=s.maxshape,
                             shuffle=True, compression="gzip")
        g.flush()
        assert d.id.get_num_chunks() == 1, "rows not one chunk"
        mask, raw = d.id.read_direct_chunk((0,))
        body = zlib.decompress(raw)
        # only the stream's own entries survive (its shuffled bytes cut to a quarter of the
        # chunk): HDF5 1.10 returns the rest of its chunk buffer as data unless the reader checks
        d.id.write_direct_chunk((0,), zlib.compress(body[:len(body) // 4]), mask)
    elif mode == "many_requests":     # 3 million requests claimed, shape datasets to match
        n = 3000000
        copy(f, g, skip_attr=("n_requests",), skip=("requests/prompt_len", "requests/output_len"))
        g.attrs["n_requests"] = np.uint32(n)
        g.create_dataset("requests/prompt_len", data=np.full(n, 100, dtype=np.uint32), compression="gzip", chunks=(1 << 20,))
        g.create_dataset("requests/output_len", data=np.full(n, 9, dtype=np.uint32), compression="gzip", chunks=(1 << 20,))
    elif mode == "huge_output":       # an output length far beyond the index
        copy(f, g, skip=("requests/output_len",))
        out = f["requests/output_len"][()]
        out[0] = 1 << 31
        g.create_dataset("requests/output_len", data=out)
    else:
        sys.exit("unknown mode " + mode)
