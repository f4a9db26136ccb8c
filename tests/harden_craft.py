# tests/harden_craft.py MODE IN OUT: a copy of trace IN with one fault planted (tests/cli_harden.sh).
# Every copy is written with h5py, not with the project's writer, so the reader is tested
# against what any HDF5 writer can produce.
import sys
import h5py
import numpy as np

mode, src, dst = sys.argv[1:4]


def copy(f, g, skip_attr=(), skip=()):
    for k, v in f.attrs.items():
        if k not in skip_attr:
            g.attrs[k] = v
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and name not in skip:
            g.create_dataset(name, data=obj[()])
    f.visititems(visit)


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
