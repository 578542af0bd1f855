# Built by native/build.mjs (npm's install script): node-gyp rebuild in this folder, output in
# native/build/Release/udpbatch.node. Linux only; elsewhere nothing is built and clusterdns
# uses node:dgram.
{
  "targets": [
    {
      "target_name": "udpbatch",
      "conditions": [
        ["OS=='linux'", {
          "sources": ["udpbatch.c", "heap.cc"],
          "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"],
          "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS"]
        }]
      ]
    }
  ]
}
