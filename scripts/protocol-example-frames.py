#!/usr/bin/env python3
"""Prints the example frames of docs/PROTOCOL.md ("Example frames"), built byte by byte from the
document's tables rather than from include/xagg/: paste its output over the section's frames
after a wire change. tests/protocol_examples_test.cpp then checks the document against both
paths, so a generator that disagrees with the code is caught there."""
import struct

AGG = ("10.0.0.100", "02:00:00:00:00:aa", 9871)
RANKS = {0: ("10.0.0.1", "02:00:00:00:00:01", 5000), 1: ("10.0.0.2", "02:00:00:00:00:02", 5001)}
GROUP = ("239.1.0.7", 9872)
JOB, KEY, VERSION, ELEMS, EXPONENT = 7, 0x5EC2E79A41B03D16, 3, 768, -8
# The job of jumbo chunks beside it.
JUMBO_JOB, JUMBO_KEY, JUMBO_ELEMS, JUMBO_GROUP = 9, 0x41B03D165EC2E79A, 2048, ("239.1.0.9", 9872)
HDR = 40
F_RESULT, F_RETRANSMIT, F_RESENT = 0x01, 0x02, 0x08


def ip(a):
    return bytes(int(x) for x in a.split("."))


def mac(m):
    return bytes(int(x, 16) for x in m.split(":"))


def csum(h):
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_csum(src, dst, datagram):
    """RFC 768 over the pseudo-header and the datagram (its checksum field zero); 0 goes as 0xffff."""
    data = ip(src) + ip(dst) + struct.pack("!BBH", 0, 17, len(datagram)) + datagram
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s & 0xFFFF) or 0xFFFF


def hexs(b):
    return " ".join(f"{x:02x}" for x in b)


def frame(name, comment, attrs="", *, src, dst, dst_mac, src_mac, sport, dport, flags=0, rank=0,
          job=JOB, rnd=0, chunk=0, nelem=ELEMS, values=None, value=3, contrib=0, key=KEY,
          version=VERSION, magic=b"XAGG", keyed=True, checksum=None):
    nvals = nelem if values is None else values
    udp_len = 8 + (HDR if keyed else HDR - 8) + 4 * nvals
    tot = 20 + udp_len
    # Results carry a UDP checksum. A contribution carries one when `checksum` is "right", one
    # its sender computed before a value changed on the way when "stale", and none (0) otherwise.
    check = 0
    if rank == 0xFFFF or checksum in ("right", "stale"):
        summed = value - 1 if checksum == "stale" else value
        body = (magic + struct.pack("!BBHIIIHbBQ", version, flags, rank, job, rnd, chunk, nelem,
                                     EXPONENT, 0, contrib) +
                (struct.pack("!Q", key) if keyed else b"") + struct.pack("<i", summed) * nvals)
        check = udp_csum(src, dst, struct.pack("!HHHH", sport, dport, udp_len, 0) + body)
    iph = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, tot, 0, 0x4000, 64, 17, 0, ip(src), ip(dst)))
    iph[10:12] = struct.pack("!H", csum(bytes(iph)))
    out = [f"```xagg-frame {name}{(' ' + attrs) if attrs else ''}", f"# {comment}",
           "# Ethernet: destination, source, type IPv4",
           f"{hexs(mac(dst_mac))}  {hexs(mac(src_mac))}  08 00",
           f"# IPv4: 45, length {tot}, DF, TTL 64, UDP, checksum, {src} -> {dst}",
           hexs(iph[:12]), hexs(iph[12:]),
           f"# UDP: {sport} -> {dport}, length {udp_len}, checksum "
           + (f"0x{check:04x}" if check else "0 (none)"),
           hexs(struct.pack("!HHHH", sport, dport, udp_len, check)),
           f"# xagg: magic, version {version}, flags 0x{flags:02x}, rank {rank}, job {job}, "
           f"round {rnd}, chunk {chunk}",
           hexs(magic + struct.pack("!BBHI", version, flags, rank, job)) + "  " +
           hexs(struct.pack("!II", rnd, chunk)),
           f"# nelem {nelem}, exponent {EXPONENT}, reserved, contrib 0x{contrib:x}",
           hexs(struct.pack("!HbB", nelem, EXPONENT, 0)) + "  " + hexs(struct.pack("!Q", contrib)),
           *([f"# key 0x{key:016x}" + (" (zero: results never carry it)" if rank == 0xFFFF else ""),
              hexs(struct.pack("!Q", key))] if keyed else []),
           f"# payload: {nvals} values of {value}, little-endian",
           f"{hexs(struct.pack('<i', value))} * {nvals}", "```", ""]
    print("\n".join(out))


def worker(name, comment, attrs, rank=0, sport=None, **kw):
    a, m, p = RANKS[rank]
    frame(name, comment, attrs, src=a, dst=AGG[0], src_mac=m, dst_mac=AGG[1],
          sport=sport or p, dport=AGG[2], rank=rank, **kw)


worker("contribution", "rank 0 of job 7 contributes chunk 0 of round 0: 768 values of 3 at exponent -8, "
       "with the UDP checksum its kernel or NIC fills in",
       "action=drop counter=aggregated", checksum="right")
worker("last-contribution", "rank 1 contributes 768 values of 4, with no UDP checksum (0, allowed): "
       "the chunk is complete", "action=tx counter=completed reply=result", rank=1, value=4)
frame("result", "what leaves the aggregator: the sum (7) to the group 239.1.0.7:9872, contrib = ranks 0 and 1",
      src=AGG[0], dst=GROUP[0], dst_mac="01:00:5e:01:00:07", src_mac=AGG[1], sport=AGG[2],
      dport=GROUP[1], flags=F_RESULT, rank=0xFFFF, value=7, contrib=3, key=0)
worker("retransmit", "rank 0 missed the result and sends its contribution again, marked RETRANSMIT",
       "action=tx counter=resent reply=resent-result", flags=F_RETRANSMIT)
frame("resent-result", "the result re-sent to rank 0 alone: addresses swapped, flags RESULT | RESENT",
      src=AGG[0], dst=RANKS[0][0], dst_mac=RANKS[0][1], src_mac=AGG[1], sport=AGG[2],
      dport=RANKS[0][2], flags=F_RESULT | F_RESENT, rank=0xFFFF, value=7, contrib=3, key=0)
print("Refused, each counted and dropped; none of them is added to anything:\n")
worker("bad-magic", 'magic "XAGH"', "action=drop counter=drop_bad_magic", rnd=1, magic=b"XAGH")
worker("version-2", "a worker of version 2: a 32-byte header, without the key",
       "action=drop counter=drop_bad_version", rnd=1, version=2, keyed=False)
worker("one-value-short", "nelem says 768, the datagram holds 767 values",
       "action=drop counter=drop_bad_length", rnd=1, values=767)
worker("result-flag-from-worker", "a worker may not set RESULT", "action=drop counter=drop_bad_flags",
       rnd=1, flags=F_RESULT)
worker("unknown-job", "job 8 is not registered", "action=drop counter=drop_unknown_job", rnd=1, job=8)
worker("wrong-key", "rank 0's address and port, but not the job's key: a spoofer who never joined",
       "action=drop counter=drop_bad_key", rnd=1, key=0x0123456789ABCDEF)
worker("no-key", "the key field left zero", "action=drop counter=drop_bad_key", rnd=1, key=0)
worker("payload-changed-on-the-way", "the sender checksummed 768 values of 2; they arrive as 3",
       "action=drop counter=drop_bad_udp_checksum host=kernel", rnd=1, checksum="stale")
worker("wrong-source-port", "rank 0 from port 5002, not its registered 5000",
       "action=drop counter=drop_not_member", rnd=1, sport=5002)
print("A job of jumbo chunks, job 9: the same exchange in 8274-byte frames (the payload reaches\n"
      "past the first 4 KiB, so most drivers hand it over in several buffers), then a standard\n"
      "chunk sent to it:\n")
worker("jumbo-contribution", "rank 0 of job 9 contributes chunk 0 of round 0: 2048 values of 5, with a "
       "UDP checksum", "action=drop counter=aggregated", job=JUMBO_JOB, key=JUMBO_KEY,
       nelem=JUMBO_ELEMS, value=5, checksum="right")
worker("jumbo-last-contribution", "rank 1 contributes 2048 values of 6: the chunk is complete",
       "action=tx counter=completed reply=jumbo-result", rank=1, job=JUMBO_JOB, key=JUMBO_KEY,
       nelem=JUMBO_ELEMS, value=6)
frame("jumbo-result", "the sum (11) to job 9's group 239.1.0.9:9872, one frame of 8274 bytes",
      src=AGG[0], dst=JUMBO_GROUP[0], dst_mac="01:00:5e:01:00:09", src_mac=AGG[1], sport=AGG[2],
      dport=JUMBO_GROUP[1], flags=F_RESULT, rank=0xFFFF, job=JUMBO_JOB, nelem=JUMBO_ELEMS,
      value=11, contrib=3, key=0)
worker("standard-chunk-to-jumbo-job", "a 768-value chunk under job 9's key: not the job's chunk size",
       "action=drop counter=drop_bad_length", rnd=1, job=JUMBO_JOB, key=JUMBO_KEY)
