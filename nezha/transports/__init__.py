"""Transports: the Python factories that set up endpoints the engine drives through the C
contract of include/nezha/nezha_transport.h (tcp: nezha/rails/tcp and nezha/mesh.py; shm:
shm.py). See docs/rails.md."""
