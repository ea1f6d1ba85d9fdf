"""The S3 rows of scripts/bench/zarrbench.py (`--rows s3`).

Both stores go into a bucket of a moto server started on 127.0.0.1 (as
scripts/bench/remote.py starts it, from the servers venv), filled by
scripts/bench/s3client.py. Then the same rounds as the local rows: bloscfs
mounting `s3://BUCKET/` (`-o endpoint=...`) against zarr-python reading the
store through obstore (`zarr.storage.ObjectStore`) and tensorstore's `s3`
kvstore driver (`endpoint`). Every request a side makes is counted in moto's
access log: for the full read (bloscfs: from its mount on, listing included)
and for each random read.
"""

import os
import shutil
import subprocess

import zarr

import bench
import remote
import zarrbench as zb

BUCKET = "zarrbench"


def upload(stores, top, n, bins, port):
    """The stores in BUCKET, at its root (hard links of their files in a directory
    of their own, so that only this size's stores are uploaded)."""
    up = os.path.join(top, f"s3-{n}")
    shutil.rmtree(up, ignore_errors=True)
    for path in stores.values():
        shutil.copytree(path, os.path.join(up, os.path.basename(path)), copy_function=os.link)
    subprocess.run([os.path.join(bins, "python"), remote.S3CLIENT, f"http://127.0.0.1:{port}", "fill",
                    BUCKET, up], check=True, capture_output=True)


def zarr_store(endpoint):
    """A zarr-python store of BUCKET through obstore (made afresh: nothing cached)."""
    from obstore.store import S3Store

    s3 = S3Store(BUCKET, endpoint=endpoint, region=remote.REGION, access_key_id=remote.ACCESS_KEY,
                 secret_access_key=remote.SECRET_KEY, client_options={"allow_http": True})
    return zarr.storage.ObjectStore(s3, read_only=True)


def rows(stores, top, n, args, mods):
    bins = remote.servers_bin(bench.ROOT)
    if bins is None:
        print("# no servers venv (.venv-servers: run scripts/setup.sh, or set $BENCH_SERVERS_VENV): "
              "no S3 rows")
        return
    os.environ.update(AWS_ACCESS_KEY_ID=remote.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=remote.SECRET_KEY,
                      AWS_REGION=remote.REGION)
    port = remote.free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = remote.Server([os.path.join(bins, "moto_server"), "-H", "127.0.0.1", "-p", str(port)], port, "/",
                         os.path.join(top, "moto.log"))
    mp = os.path.join(top, "mnt")
    try:
        upload(stores, top, n, bins, port)
        # Every request to the bucket (moto logs one line per request once answered).
        count = lambda: moto.logged(f" /{BUCKET}")  # noqa: E731
        for name, path in stores.items():
            key = os.path.basename(path)
            npy = os.path.join(mp, key[:-5] + ".npy")
            sides = [zb.ours(lambda: bench.Mount(f"s3://{BUCKET}/", mp, opts=f"endpoint={endpoint}"), npy)]
            if mods["obstore"]:
                sides.append(zb.zarr_python(
                    lambda key=key: zarr.open_array(zarr_store(endpoint), path=key, mode="r"), n))
            if mods["tensorstore"]:
                kv = {"driver": "s3", "bucket": BUCKET, "path": key + "/", "endpoint": endpoint,
                      "aws_region": remote.REGION, "aws_credentials": {"type": "environment"}}
                sides.append(zb.tensorstore(mods["tensorstore"], zb.ts_spec(path, name.startswith("v3"), kv), n))
            zb.measure(f"{name} over S3", sides, n, args, count)
        heads = moto.logged(f"HEAD /{BUCKET}")
        print(f"# of the requests counted, {heads} were HEADs, the rest GETs")
    finally:
        if bench.is_mounted(mp):  # a measurement failed mid-way
            subprocess.run(["fusermount3", "-u", mp])
        moto.close()
