{
  "targets": [
    {
      "target_name": "layerfs",
      "sources": ["layerfs.c"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
