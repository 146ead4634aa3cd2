{
  "targets": [
    {
      "target_name": "linuxsys",
      "sources": ["linuxsys.c", "heap.cc"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
