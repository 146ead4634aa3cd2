{
  "targets": [
    {
      "target_name": "seqpacket",
      "sources": ["seqpacket.c"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
