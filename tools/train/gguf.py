"""A small GGUF v3 writer and reader (little-endian, F32 tensors only).

The layout follows book/appendix-gguf.md A.1:
header, metadata key/values, tensor infos, zero padding to 32 bytes, then
the tensor data, each tensor starting at a multiple of 32 bytes.
"""
import struct

import numpy as np

ALIGNMENT = 32

# Metadata value types (book/appendix-gguf.md A.1.2).
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, \
    UINT64, INT64, FLOAT64 = range(13)

SCALAR_FORMATS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h",
                  UINT32: "<I", INT32: "<i", FLOAT32: "<f", BOOL: "<?",
                  UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

GGML_TYPE_F32 = 0


def align_up(x, a=ALIGNMENT):
    return x + (a - x % a) % a


# ---------------------------------------------------------------- writing

def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype, value):
    if vtype == STRING:
        return _string(value)
    return struct.pack(SCALAR_FORMATS[vtype], value)


class GGUFWriter:
    """Collects metadata and tensors, then writes the whole file at once."""

    def __init__(self):
        self.kv = []        # (key, type, value, element type for arrays)
        self.tensors = []   # (name, float32 numpy array in torch order)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value, None))

    def add_array(self, key, elem_type, values):
        self.kv.append((key, ARRAY, list(values), elem_type))

    def add_tensor(self, name, array):
        assert len(name) < 64, name
        self.tensors.append((name, np.ascontiguousarray(array, dtype="<f4")))

    def _metadata_bytes(self):
        out = []
        for key, vtype, value, elem in self.kv:
            out.append(_string(key) + struct.pack("<I", vtype))
            if vtype == ARRAY:
                out.append(struct.pack("<IQ", elem, len(value)))
                out.extend(_value(elem, v) for v in value)
            else:
                out.append(_value(vtype, value))
        return b"".join(out)

    def _tensor_info_bytes(self):
        out, offset = [], 0
        for name, arr in self.tensors:
            ne = list(reversed(arr.shape))   # GGUF ne[0] is the fastest dimension
            out.append(_string(name) + struct.pack("<I", len(ne)))
            out.append(struct.pack("<%dQ" % len(ne), *ne))
            out.append(struct.pack("<IQ", GGML_TYPE_F32, offset))
            offset = align_up(offset + arr.nbytes)
        return b"".join(out)

    def write(self, path):
        head = struct.pack("<4sIQQ", b"GGUF", 3, len(self.tensors), len(self.kv))
        head += self._metadata_bytes() + self._tensor_info_bytes()
        with open(path, "wb") as f:
            f.write(head + b"\0" * (align_up(len(head)) - len(head)))
            for _, arr in self.tensors:
                data = arr.tobytes()
                f.write(data + b"\0" * (align_up(len(data)) - len(data)))


# ---------------------------------------------------------------- reading

class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def string(self):
        n = self.take("<Q")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            elem, n = self.take("<IQ")
            return [self.value(elem) for _ in range(n)]
        return self.take(SCALAR_FORMATS[vtype])


def read_gguf(path):
    """Returns (metadata dict, tensors dict name -> numpy array in torch order).

    Supports F32 tensors (all this tool writes) and F16 (type 1)."""
    buf = memoryview(open(path, "rb").read())
    c = _Cursor(buf)
    magic, version, n_tensors, n_kv = c.take("<4sIQQ")
    assert magic == b"GGUF" and version in (2, 3), (magic, version)
    meta = {}
    for _ in range(n_kv):
        key = c.string()
        meta[key] = c.value(c.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = c.string()
        n_dims = c.take("<I")
        ne = [c.take("<Q") for _ in range(n_dims)]
        ttype, offset = c.take("<IQ")
        infos.append((name, ne, ttype, offset))
    data_start = align_up(c.pos, meta.get("general.alignment", ALIGNMENT))
    dtypes = {0: "<f4", 1: "<f2"}
    tensors = {}
    for name, ne, ttype, offset in infos:
        assert ttype in dtypes, "unsupported tensor type %d in %s" % (ttype, name)
        count = int(np.prod(ne))
        arr = np.frombuffer(buf, dtype=dtypes[ttype], count=count,
                            offset=data_start + offset)
        tensors[name] = arr.astype(np.float32).reshape(list(reversed(ne)))
    return meta, tensors
