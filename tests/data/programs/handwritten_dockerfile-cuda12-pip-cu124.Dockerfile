# hand-written (see README.md): a training image on CUDA 12.4 with the matching PyTorch wheel
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
RUN apt-get update && apt-get install -y --no-install-recommends python3-pip && rm -rf /var/lib/apt/lists/*
RUN pip3 install torch==2.3.0 --index-url https://download.pytorch.org/whl/cu124
WORKDIR /app
COPY . .
CMD ["python3", "train.py"]
