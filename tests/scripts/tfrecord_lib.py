"""An independent TFRecord and tf.train.Example codec in Python's standard library
only (struct and a table CRC-32C of our own), for checking tpusim's files and for
writing datasets tpusim did not write. Layouts: TensorFlow's record_writer.cc and
example.proto / feature.proto in the protobuf wire format."""
import struct

_TABLE = []
for _b in range(256):
    _c = _b
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = (c >> 8) ^ _TABLE[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    header = struct.pack('<Q', len(data))
    return header + struct.pack('<I', masked_crc(header)) + data + struct.pack('<I', masked_crc(data))


def read_records(blob):
    """[(offset, data)] of every record; raises ValueError on any framing or CRC fault."""
    out, at = [], 0
    while at < len(blob):
        if len(blob) - at < 12:
            raise ValueError(f'truncated header at {at}')
        header = blob[at:at + 8]
        (length,) = struct.unpack('<Q', header)
        (lcrc,) = struct.unpack('<I', blob[at + 8:at + 12])
        if lcrc != masked_crc(header):
            raise ValueError(f'length crc at {at}')
        data = blob[at + 12:at + 12 + length]
        if len(data) != length or len(blob) < at + 16 + length:
            raise ValueError(f'truncated record at {at}')
        (dcrc,) = struct.unpack('<I', blob[at + 12 + length:at + 16 + length])
        if dcrc != masked_crc(data):
            raise ValueError(f'data crc at {at}')
        out.append((at, data))
        at += 16 + length
    return out


def _varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(number, payload):
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def encode_example(features):
    """features: [(key, kind, values)], kind 'bytes' | 'float' | 'int64'; lists packed."""
    entries = b''
    for key, kind, values in features:
        if kind == 'bytes':
            lst = b''.join(_field(1, v) for v in values)
            feature = _field(1, lst)
        elif kind == 'float':
            packed = b''.join(struct.pack('<f', v) for v in values)
            feature = _field(2, _field(1, packed) if packed else b'')
        else:
            packed = b''.join(_varint(v) for v in values)
            feature = _field(3, _field(1, packed) if packed else b'')
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))
    return _field(1, entries)


def _read_varint(buf, at):
    value, shift = 0, 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def _fields(buf):
    at = 0
    while at < len(buf):
        tag, at = _read_varint(buf, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = _read_varint(buf, at)
        elif wire == 2:
            n, at = _read_varint(buf, at)
            value, at = buf[at:at + n], at + n
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        else:
            raise ValueError(f'wire type {wire}')
        yield number, wire, value


def decode_example(data):
    """{key: (kind, [values])} of a serialized Example (packed or unpacked lists)."""
    out = {}
    for n, _, features in _fields(data):
        if n != 1:
            continue
        for m, _, entry in _fields(features):
            if m != 1:
                continue
            key, kind, values = '', 'bytes', []
            for k, _, v in _fields(entry):
                if k == 1:
                    key = v.decode()
                elif k == 2:
                    for f, _, lst in _fields(v):
                        kind = {1: 'bytes', 2: 'float', 3: 'int64'}[f]
                        values = []
                        for _, wire, item in _fields(lst):
                            if kind == 'bytes':
                                values.append(bytes(item))
                            elif kind == 'float' and wire == 2:
                                values += list(struct.unpack(f'<{len(item) // 4}f', item))
                            elif kind == 'float':
                                values += list(struct.unpack('<f', item))
                            elif wire == 2:
                                at = 0
                                while at < len(item):
                                    v2, at = _read_varint(item, at)
                                    values.append(v2 - (1 << 64) if v2 >= 1 << 63 else v2)
                            else:
                                values.append(item - (1 << 64) if item >= 1 << 63 else item)
            out[key] = (kind, values)
    return out
