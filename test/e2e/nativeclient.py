"""What the native-API e2e tests share (test_native_*.py, test_cli.py): the
grpcio modules generated at test time from proto/ (protoc with
grpc_python_plugin), pelotond with a native port, a gRPC channel on it, a
unary call by wire path, a pool to run jobs in. The whole stack with a
native port is services.start_stack(..., native=True).

Every process started here is one of services.py's, stopped when the test
file ends."""
import os
import subprocess
import sys

import services


def generate_stubs():
    """Generates the Python modules of every proto under proto/ (but
    google's and peloton_c's) into a new temporary folder, puts that folder
    first on sys.path and returns it: import them (and grpc) after this."""
    root = os.path.join(services.ROOT, "proto")
    gen = services.tempdir()
    subprocess.run(["protoc", f"-I{root}", f"--python_out={gen}", f"--grpc_out={gen}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"] +
                   [os.path.relpath(os.path.join(d, f), root)
                    for d, _, fs in os.walk(root) for f in fs
                    if f.endswith(".proto") and "google" not in d and "peloton_c" not in d],
                   check=True, cwd=root)
    sys.path.insert(0, gen)
    return gen


def start_pelotond(redis_port, *flags):
    """pelotond (services.start_pelotond with flags) with a native port, once
    that port takes connections: (process, API port, log path, native port)."""
    nport = services.free_port()
    p, port, log = services.start_pelotond(redis_port, *flags, f"--native-port={nport}")
    services.wait_port(nport, "native port")
    return p, port, log, nport


def channel(nport):
    """An insecure gRPC channel to 127.0.0.1:nport (after generate_stubs)."""
    import grpc
    return grpc.insecure_channel(f"127.0.0.1:{nport}")


def unary(ch, path, req, resp_type, timeout=20, **kw):
    """One unary call of method path (a wire name, "/pkg.Service/Method") on
    ch: req serialized, the answer read as resp_type; waits for the channel
    to be ready. Errors are raised (grpc.RpcError)."""
    return ch.unary_unary(path, request_serializer=type(req).SerializeToString,
                          response_deserializer=resp_type.FromString)(req, timeout=timeout, wait_for_ready=True, **kw)



def start_with_token(token):
    """redis-server and pelotond (API server and native roles) whose API
    asks for token (--token-file): (process, log path, native port, the
    token file)."""
    tf = os.path.join(services.tempdir(), "token")
    with open(tf, "w") as f:
        f.write(token + "\n")
    p, _, log, nport = start_pelotond(services.start_redis(), "--roles=apiserver,native", f"--token-file={tf}")
    return p, log, nport, tf


def create_pool(ch, name, cpu, mem, timeout=20):
    """A pool name under root through the v0 ResourceManager on ch (after
    generate_stubs), cpu and mem being (reservation, limit); asserts it was
    created."""
    from peloton.api.v0 import peloton_pb2 as pb
    from peloton.api.v0.respool import respool_pb2 as rp, respool_pb2_grpc as rpg
    r = rpg.ResourceManagerStub(ch).CreateResourcePool(rp.CreateRequest(config=rp.ResourcePoolConfig(
        name=name, parent=pb.ResourcePoolID(value="root"),
        resources=[rp.ResourceConfig(kind="cpu", reservation=cpu[0], limit=cpu[1], share=1),
                   rp.ResourceConfig(kind="memory", reservation=mem[0], limit=mem[1], share=1)])),
        timeout=timeout, wait_for_ready=True)
    assert r.result.value == name, r
