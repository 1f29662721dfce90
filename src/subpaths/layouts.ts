// `webccl/layouts`: tensors between layouts and dtypes (NCHW, NHWC, NC1HWC0; f32, bf16, f16, ...)
// with the WebAssembly kernels the collectives use, and the tensor shapes they take. Re-exports
// of the main entry: one module, one state.
export {
  convertDtype,
  convertLayout,
  DTYPE_ALIASES,
  LAYOUTS,
  type Layout,
  type LayoutTensor,
  type LayoutTensorArg,
  type OrtTensorLike,
  type TensorLike,
} from '../index.js';
