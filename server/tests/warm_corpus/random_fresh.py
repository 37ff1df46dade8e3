# warm corpus: random state is fresh per run (VARY lines differ between two runs); seeded values are not
import hashlib
import multiprocessing
import os
import random
import secrets
import sys
import tempfile
import uuid

print("VARY: random", random.random())
print("VARY: getrandbits", random.getrandbits(64))
print("VARY: choice", "".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(20)))
print("VARY: uuid4", uuid.uuid4())
print("VARY: secrets", secrets.token_hex(16))
print("VARY: urandom", os.urandom(16).hex())
print("VARY: systemrandom", random.SystemRandom().random())
fd, path = tempfile.mkstemp()
os.close(fd)
print("VARY: mkstemp", os.path.basename(path))
print("VARY: mkdtemp", os.path.basename(tempfile.mkdtemp()))
with tempfile.NamedTemporaryFile() as f:
    print("VARY: namedtemporaryfile", os.path.basename(f.name))
print("VARY: candidate name", next(tempfile._get_candidate_names()))
print("VARY: str hash", hash("the same text"))
print("VARY: authkey", hashlib.sha256(multiprocessing.current_process().authkey).hexdigest())
print("hash randomization", sys.flags.hash_randomization)
random.seed(1)
print("seeded", random.random())
print("own generator", random.Random(5).random())
