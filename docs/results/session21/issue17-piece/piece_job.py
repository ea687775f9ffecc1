import numpy as np, nezha
comm = nezha.Communicator()
x = np.ones(16384, np.float32)
comm.allreduce(x)
assert x[0] == comm.size
comm.close() if hasattr(comm, "close") else None
