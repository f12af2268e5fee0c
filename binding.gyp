{
  "targets": [
    {
      "target_name": "walk",
      "sources": ["native/walk.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"]
    }
  ]
}
