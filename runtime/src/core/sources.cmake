target_sources(hvd PRIVATE)
