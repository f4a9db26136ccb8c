# tests/h5_valid_zoo.py TRACE OUTDIR: valid HDF5 files written by h5py (so by libhdf5 itself), of
# every structure the reader's pre-check (traces/h5pre.c) walks, for tests/cli_harden.sh: each must
# pass the pre-check, since a file HDF5 wrote is never damaged. Two kinds:
#   OUTDIR/trace-*.h5  the trace TRACE rewritten in several layouts; `dhtrace check` must say ok;
#   OUTDIR/zoo-*.h5    files of other content (attributes of every class, chunked and compressed
#                      datasets, dense and compact groups, links, deleted objects, grown headers);
#                      the pre-check must pass (the trace schema then fails, which is expected).
import os
import sys

import h5py
import numpy as np

src, out = sys.argv[1:3]
os.makedirs(out, exist_ok=True)


def copy_trace(f, g, chunked):
    for k, v in f.attrs.items():
        g.attrs[k] = v

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            kw = {}
            if chunked and obj.shape and obj.shape[0] > 1:
                kw = dict(chunks=(max(1, obj.shape[0] // 3),), compression="gzip", shuffle=True, fletcher32=True,
                          maxshape=(None,))
            g.create_dataset(name, data=obj[()], **kw)
    f.visititems(visit)


with h5py.File(src, "r") as f:
    for libver in ("earliest", "latest"):
        for chunked in (0, 1):
            for order in (False, True):
                name = f"{out}/trace-{libver}-{'chunked' if chunked else 'plain'}{'-ordered' if order else ''}.h5"
                with h5py.File(name, "w", libver=libver, track_order=order) as g:
                    copy_trace(f, g, chunked)
    # Appended to in place: attributes added after the datasets grow the root header with
    # continuation chunks; a deleted dataset leaves its header behind.
    for libver in ("earliest", "latest"):
        name = f"{out}/trace-{libver}-grown.h5"
        with h5py.File(name, "w", libver=libver) as g:
            copy_trace(f, g, 0)
            g.create_dataset("scratch", data=np.arange(100))
        with h5py.File(name, "a") as g:
            del g["scratch"]
            for i in range(30):
                g.attrs[f"extra_{i}"] = "x" * (i * 37 % 300)


def attrs_of_every_class(o, ref_target):
    a = o.attrs
    for t in ("i1", "u1", "<i2", ">u2", "<i4", "<u8", ">i8", "<f2", "<f4", ">f8", "c8", "c16", "?"):
        a["s_" + t.replace("<", "le").replace(">", "be")] = np.array(3, dtype=t)
        a["v_" + t.replace("<", "le").replace(">", "be")] = np.arange(7).astype(t)
    a["fixed"] = np.bytes_(b"fixed-length")
    a["fixed_arr"] = np.array([b"ab", b"cde"], dtype="S3")
    a["vlen"] = "variable"
    a["vlen_empty"] = ""
    a["vlen_unicode"] = "\u00e9\u4e2d\u6587"
    a["vlen_arr2d"] = np.array([["a", "bb"], ["", "dddd"]], dtype=h5py.string_dtype())
    a["vlen_bytes"] = np.array([b"x", b"yz"], dtype=h5py.string_dtype("ascii"))
    a["vlen_int"] = np.array([np.arange(3, dtype=np.int32), np.arange(0, dtype=np.int32), np.arange(9, dtype=np.int32)],
                             dtype=h5py.vlen_dtype(np.int32))
    cdt = np.dtype([("i", "<u4"), ("f", "<f8"), ("s", h5py.string_dtype()), ("a", "<i2", (2, 3))])
    a["compound"] = np.array([(1, 2.5, "one", np.zeros((2, 3))), (2, 3.5, "", np.ones((2, 3)))], dtype=cdt)
    a["enum"] = np.array([0, 1, 2], dtype=h5py.enum_dtype({"red": 0, "green": 1, "blue": 2}, basetype="u1"))
    a["array"] = np.zeros(4, dtype=np.dtype(("<i4", (3,))))
    a["opaque"] = np.void(b"\x00\x01\x02opaque")
    a["empty"] = h5py.Empty("f4")
    a["ref"] = ref_target.ref
    a["big"] = np.arange(60000 // 8, dtype="<f8")  # near the 64 KiB compact limit


for libver in ("earliest", "latest"):
    for order in (False, True):
        name = f"{out}/zoo-{libver}{'-ordered' if order else ''}.h5"
        with h5py.File(name, "w", libver=libver, track_order=order) as g:
            d = g.create_dataset("contig", data=np.arange(1000, dtype="<u4"))
            attrs_of_every_class(g, d)
            attrs_of_every_class(d, d)
            g.create_dataset("gzip", data=np.arange(5000, dtype="<i8"), chunks=(333,), compression="gzip",
                             compression_opts=9, shuffle=True, fletcher32=True)
            g.create_dataset("lzf", data=np.arange(5000, dtype="<f4"), chunks=(100,), compression="lzf")
            # 1,000 chunks: a chunk B-tree of more than one level.
            g.create_dataset("many_chunks", data=np.arange(5000, dtype="<u2"), chunks=(5,), fletcher32=True)
            g.create_dataset("scaleoffset", data=np.arange(5000, dtype="<i4"), chunks=(1000,), scaleoffset=0)
            g.create_dataset("ext", data=np.arange(50, dtype="<u2"), chunks=(7,), maxshape=(None,))
            g.create_dataset("ext2d", data=np.ones((20, 30)), chunks=(4, 5), maxshape=(None, None), compression="gzip")
            g.create_dataset("fill", shape=(100,), dtype="<i4", fillvalue=-7)
            g.create_dataset("fill_chunked", shape=(100,), dtype="<f8", fillvalue=1.5, chunks=(10,))
            g.create_dataset("scalar", data=np.float64(2.5))
            g.create_dataset("zero", shape=(0,), dtype="<u4")
            g.create_dataset("empty", data=h5py.Empty("i8"))
            g.create_dataset("vlen_str", data=np.array(["a", "", "ccc" * 100] * 50, dtype=h5py.string_dtype()))
            g.create_dataset("vlen_str_chunked", data=np.array(["p", "qq"] * 40, dtype=h5py.string_dtype()), chunks=(9,),
                             compression="gzip")
            cdt = np.dtype([("o", "<u8"), ("s", h5py.string_dtype()), ("k", "u1")])
            g.create_dataset("compound", data=np.array([(i, str(i) * i, i % 2) for i in range(40)], dtype=cdt))
            # A compact dataset and a fill-value-less one through the low-level API.
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            sp = h5py.h5s.create_simple((16,))
            h5py.h5d.create(g.id, b"compact", h5py.h5t.STD_I32LE, sp, dcpl=dcpl).write(
                h5py.h5s.ALL, h5py.h5s.ALL, np.arange(16, dtype="<i4"))
            # Groups: nested, large (dense in the latest format), with soft, external and cyclic links.
            big = g.create_group("big")
            for i in range(120):
                big.create_group(f"m{i}").attrs["i"] = i
            many = g.create_group("many_attrs")
            for i in range(40):
                many.attrs[f"a{i}"] = f"value {i}"
            g["soft"] = h5py.SoftLink("/contig")
            g["external"] = h5py.ExternalLink("other.h5", "/x")
            g["big/loop"] = g["big"]
            g.create_group("a/b/c/d/e").attrs["deep"] = "yes"
            h5py.h5o.set_comment(g["a/b"].id, b"a comment on a group")
            g.create_dataset("external_data", shape=(100,), dtype="<u4",
                             external=[(f"{out}/raw-{libver}{int(order)}.bin", 0, 400)])
            g.create_dataset("doomed", data=np.arange(64))
            g.create_group("doomed_group").attrs["x"] = "gone"
        # Reopened: objects deleted (their headers stay behind as free space), attributes
        # rewritten and deleted, headers grown past their first chunk.
        with h5py.File(name, "a") as g:
            del g["doomed"]
            del g["doomed_group"]
            for i in range(0, 40, 3):
                del g["many_attrs"].attrs[f"a{i}"]
            for i in range(25):
                g["contig"].attrs[f"late_{i}"] = np.arange(i + 1)
            g.create_dataset("after", data=np.arange(10))
# A file with a user block: its superblock is not at byte 0 (the pre-check leaves it to HDF5).
with h5py.File(f"{out}/zoo-userblock.h5", "w", userblock_size=512) as g:
    g.attrs["s"] = "x"
