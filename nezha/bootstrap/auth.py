"""Mutual HMAC challenge on a fresh connection: both ends prove they know the job secret.

Connector -> hello: magic, rank, channel, purpose, nonce_c                (HELLO bytes)
Acceptor  -> nonce_a, HMAC(secret, "A" | hello | nonce_a)                 (CHALLENGE bytes)
Connector -> HMAC(secret, "C" | hello | nonce_a)                          (PROOF bytes)
The acceptor hands the socket to the engine only after the proof checks out, so a
stranger's bytes never reach a buffer. Domain tags "A"/"C" stop one side's answer from
being replayed as the other's.
"""
import hashlib
import hmac
import os
import struct

MAGIC = 0x4E5A4831  # "NZH1"
_HELLO = struct.Struct("<IiiI16s")  # magic, rank, channel, purpose, nonce_c
HELLO = _HELLO.size
CHALLENGE = 16 + 32
PROOF = 32

PURPOSE_DATA = 1
PURPOSE_CTRL = 2
PURPOSE_STORE = 3


def hello(rank, channel, purpose):
    """The connector's opening message."""
    return _HELLO.pack(MAGIC, rank, channel, purpose, os.urandom(16))


def parse_hello(data):
    """(rank, channel, purpose) of a hello, or None if it is not one of ours."""
    magic, rank, channel, purpose, _ = _HELLO.unpack(data)
    if magic != MAGIC:
        return None
    return rank, channel, purpose


def _mac(secret, tag, *parts):
    return hmac.new(secret, tag + b"".join(parts), hashlib.sha256).digest()


def challenge(secret, hello_bytes):
    """The acceptor's answer to a hello: a nonce and its own proof."""
    nonce = os.urandom(16)
    return nonce + _mac(secret, b"A", hello_bytes, nonce)


def check_challenge(secret, hello_bytes, data):
    """Connector: verify the acceptor's proof; return our proof, or None if it is wrong."""
    nonce, mac = data[:16], data[16:]
    if not hmac.compare_digest(mac, _mac(secret, b"A", hello_bytes, nonce)):
        return None
    return _mac(secret, b"C", hello_bytes, nonce)


def check_proof(secret, hello_bytes, challenge_bytes, proof):
    """Acceptor: True if the connector's proof is right."""
    return hmac.compare_digest(proof, _mac(secret, b"C", hello_bytes, challenge_bytes[:16]))
