print("Hello, World!")
