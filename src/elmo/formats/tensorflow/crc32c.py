"""CRC32C (Castagnoli), the checksum TensorFlow stores for every tensor of a checkpoint and every block of its index.

The core install has no CRC32C (``zlib`` has only CRC32), and a per-byte Python loop runs at a few MB/s, too slow for
weight files. So a long buffer is cut into many equal chunks whose CRC registers advance side by side in numpy, two
bytes per table lookup, and the chunks' registers are then folded together: the CRC register is linear over GF(2),
so ``reg(s, A + B) = shift_len(B)(reg(s, A)) ^ reg(0, B)``, where the shift (the register advanced over ``len(B)``
zero bytes) is a 32 x 32 bit matrix, computed once per chunk length by repeated squaring. No copy of the buffer is
made; the chunk registers take ``4 * chunks`` bytes.
"""

from __future__ import annotations

import functools

import numpy as np

_POLY = 0x82F63B78  # CRC32C, reflected
_MASK_DELTA = 0xA282EAD8
_CHUNKS = 4096  # registers advanced side by side
_SMALL = 1 << 15  # below this many bytes a plain table loop is as fast


def _byte_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_T0 = _byte_table()


@functools.cache
def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """Two 65536-entry tables that advance the register over the four bytes of one little-endian word already
    XORed into it: the low half (bytes 0, 1) and the high half (bytes 2, 3)."""
    t = [np.array(_T0, dtype=np.uint32)]
    for _ in range(3):  # t[k][b]: byte b followed by k zero bytes
        prev = t[-1]
        t.append((prev >> np.uint32(8)) ^ t[0][prev & np.uint32(0xFF)])
    low = np.arange(65536, dtype=np.uint32)
    low_half = t[3][low & 0xFF] ^ t[2][low >> 8]
    high_half = t[1][low & 0xFF] ^ t[0][low >> 8]
    return low_half, high_half


def _update_bytes(crc: int, data: bytes | memoryview) -> int:
    table = _T0
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _apply(matrix: tuple[int, ...], vector: int) -> int:
    out, bit = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[bit]
        vector >>= 1
        bit += 1
    return out


def _compose(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """a after b."""
    return tuple(_apply(a, column) for column in b)


@functools.cache
def _shift_tables(n_bytes: int) -> tuple[tuple[int, ...], ...]:
    """The register advanced over ``n_bytes`` zero bytes, as four byte-indexed lookup tables."""
    one = tuple(_update_bytes(1 << bit, b"\0") for bit in range(32))  # one zero byte
    result = tuple(1 << bit for bit in range(32))
    power = one
    while n_bytes:
        if n_bytes & 1:
            result = _compose(power, result)
        power = _compose(power, power)
        n_bytes >>= 1
    return tuple(tuple(_apply(result, value << (8 * k)) for value in range(256)) for k in range(4))


def _chunk_registers(words: np.ndarray) -> np.ndarray:
    """(chunks, words_per_chunk) little-endian words -> each chunk's register from zero. # (chunks,)"""
    low_half, high_half = _word_tables()
    crc = np.zeros(words.shape[0], dtype=np.uint32)
    index = np.empty_like(crc)
    other = np.empty_like(crc)
    for j in range(words.shape[1]):
        np.bitwise_xor(crc, words[:, j], out=crc)
        np.bitwise_and(crc, 0xFFFF, out=index)
        np.take(low_half, index, out=other)
        np.right_shift(crc, 16, out=index)
        np.take(high_half, index, out=crc)
        np.bitwise_xor(crc, other, out=crc)
    return crc


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """The CRC32C of ``data`` (continuing from the CRC ``crc`` of what came before it)."""
    view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else None
    buffer = np.frombuffer(view, dtype=np.uint8) if view is not None else data.reshape(-1).view(np.uint8)
    register = crc ^ 0xFFFFFFFF
    n = buffer.size
    if n >= _SMALL:
        chunk = (n // _CHUNKS) & ~3  # bytes per chunk, whole words
        body = _CHUNKS * chunk
        registers = _chunk_registers(buffer[:body].view("<u4").reshape(_CHUNKS, chunk // 4)).tolist()
        t0, t1, t2, t3 = _shift_tables(chunk)
        for value in registers:
            register = (t0[register & 0xFF] ^ t1[(register >> 8) & 0xFF] ^ t2[(register >> 16) & 0xFF]
                        ^ t3[register >> 24] ^ value)
        register = _update_bytes(register, buffer[body:].tobytes())
    else:
        register = _update_bytes(register, buffer.tobytes())
    return register ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """The form TensorFlow (and LevelDB) store a CRC in: rotated and offset, so a CRC of data holding CRCs is not
    trivially related to them."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rotated = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF
