{
  "targets": [
    {
      "target_name": "layerfs",
      "sources": ["layerfs.c"],
      "cflags": ["-O2", "-Wall"]
    },
    {
      "target_name": "layerhash",
      "sources": ["layerhash.c"],
      "cflags": ["-O2", "-Wall"],
      "ldflags": ["-Wl,-z,now"]
    }
  ]
}
